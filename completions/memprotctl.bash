# bash completion for memprotctl                     -*- shell-script -*-
# SPDX-License-Identifier: LGPL-2.1-or-later

__memprotctl_slices() {
    # The daemon's managed slices; nothing when it is not running.
    memprotctl list --json 2>/dev/null | sed -n 's/.*"unit": *"\([^"]*\)".*/\1/p'
}

_memprotctl() {
    local cur prev words cword
    _init_completion || return

    local verbs="status list show explain plan monitor reload mode set reset metrics dump simulate record check-config"
    local verb="" i
    for ((i = 1; i < cword; i++)); do
        if [[ ${words[i]} != -* ]]; then
            verb=${words[i]}
            break
        fi
    done

    if [[ -z $verb ]]; then
        COMPREPLY=($(compgen -W "$verbs --help --version" -- "$cur"))
        return
    fi

    case $verb in
        status | list | plan | dump)
            COMPREPLY=($(compgen -W "--json --help" -- "$cur")) ;;
        monitor)
            [[ $prev == --count ]] && return
            COMPREPLY=($(compgen -W "--json --count --help" -- "$cur")) ;;
        show | explain)
            if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "--json --help" -- "$cur"))
            else
                COMPREPLY=($(compgen -W "$(__memprotctl_slices)" -- "$cur"))
            fi ;;
        reset)
            COMPREPLY=($(compgen -W "$(__memprotctl_slices) --help" -- "$cur")) ;;
        set)
            local args=0
            for ((i = i + 1; i < cword; i++)); do [[ ${words[i]} != -* ]] && ((args++)); done
            if ((args == 0)); then
                COMPREPLY=($(compgen -W "$(__memprotctl_slices) --help" -- "$cur"))
            else
                compopt -o nospace
                COMPREPLY=($(compgen -W "Weight= MinProtection= MaxProtection= Floor= Manage=" -- "$cur"))
            fi ;;
        mode)
            COMPREPLY=($(compgen -W "enforce dry-run paused --help" -- "$cur")) ;;
        reload | metrics)
            COMPREPLY=($(compgen -W "--help" -- "$cur")) ;;
        simulate)
            case $prev in
                --root | --proc-root | --debugfs-root | --config-dir)
                    _filedir -d
                    return ;;
                --replay)
                    _filedir
                    return ;;
                --memory-total | --samples | --interval | --explain) return ;;
            esac
            COMPREPLY=($(compgen -W "--root --proc-root --debugfs-root --config-dir --memory-total --samples
                                     --interval --no-wait --services --explain --json --replay --help" -- "$cur")) ;;
        record)
            case $prev in
                --root | --proc-root | --debugfs-root)
                    _filedir -d
                    return ;;
                --output | -o)
                    _filedir
                    return ;;
                --memory-total | --samples | --interval) return ;;
            esac
            COMPREPLY=($(compgen -W "--root --proc-root --debugfs-root --memory-total --samples --interval
                                     --no-wait --output --append --help" -- "$cur")) ;;
        check-config)
            if [[ $prev == --config-dir ]]; then
                _filedir -d
                return
            fi
            COMPREPLY=($(compgen -W "--config-dir --json --help" -- "$cur")) ;;
    esac
} &&
    complete -F _memprotctl memprotctl

# ex: filetype=sh
