// SPDX-License-Identifier: LGPL-2.1-or-later
#include "private_bus.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace memprotd::test {

namespace {

std::string make_temp_dir(const char* prefix) {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/" + prefix + "XXXXXX";
    if (!mkdtemp(templ.data()))
        throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
    return templ;
}

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace

PrivateBus::PrivateBus() : dir_(make_temp_dir("memprotd-bus-")) {
    const std::string config = dir_ + "/bus.conf";
    {
        std::ofstream c(config);
        c << R"(<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>memprotd-test</type>
  <listen>unix:path=)"
          << dir_ << R"(/bus</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
  </policy>
</busconfig>
)";
    }
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0)
        throw std::runtime_error("pipe2 failed");
    const std::string config_arg = "--config-file=" + config;
    const std::string log = dir_ + "/dbus-daemon.log";
    pid_ = fork();
    if (pid_ < 0) {
        close(fds[0]);
        close(fds[1]);
        throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    }
    if (pid_ == 0) {
        // Dies with the test, even when the test crashes or is killed.
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        dup2(fds[1], STDOUT_FILENO);
        // It complains about fd limits it may not raise in containers: keep
        // that out of the test log, but keep it.
        const int err = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (err >= 0)
            dup2(err, STDERR_FILENO);
        execlp("dbus-daemon", "dbus-daemon", config_arg.c_str(), "--print-address", "--nofork",
               static_cast<char*>(nullptr));
        _exit(127);
    }
    close(fds[1]);
    std::string line;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (line.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
        struct pollfd p = {fds[0], POLLIN, 0};
        if (::poll(&p, 1, 100) <= 0)
            continue;
        char buf[512];
        const ssize_t n = read(fds[0], buf, sizeof buf);
        if (n <= 0)
            break;
        line.append(buf, static_cast<size_t>(n));
    }
    close(fds[0]);
    const auto nl = line.find('\n');
    if (nl == std::string::npos) {
        // The destructor does not run for a throwing constructor.
        kill(pid_, SIGTERM);
        waitpid(pid_, nullptr, 0);
        throw std::runtime_error("dbus-daemon did not print its address");
    }
    address_ = line.substr(0, nl);
}

void PrivateBus::stop() {
    if (pid_ > 0) {
        kill(pid_, SIGTERM);
        int status = 0;
        waitpid(pid_, &status, 0);
        pid_ = -1;
    }
}

PrivateBus::~PrivateBus() {
    stop();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
}

Child::Child(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
             const std::string& dir) {
    static std::atomic<int> counter{0};
    const int n = counter++;
    out_path_ = dir + "/child" + std::to_string(n) + ".out";
    err_path_ = dir + "/child" + std::to_string(n) + ".err";
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
        bool overridden = false;
        for (const std::string& x : extra_env)
            if (std::string_view(*e).starts_with(x.substr(0, x.find('=') + 1)))
                overridden = true;
        if (!overridden)
            env.emplace_back(*e);
    }
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    std::vector<char*> envp, args;
    for (auto& s : env) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> argv_copy = argv;
    for (auto& s : argv_copy) args.push_back(s.data());
    args.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    const int r = posix_spawn(&pid_, args[0], &fa, nullptr, args.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    if (r != 0)
        throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(r));
}

Child::~Child() {
    if (!done_ && pid_ > 0) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status_, 0);
    }
}

bool Child::poll() {
    if (done_)
        return true;
    if (waitpid(pid_, &status_, WNOHANG) == pid_)
        done_ = true;
    return done_;
}

std::string Child::out() const {
    return read_file(out_path_);
}
std::string Child::err() const {
    return read_file(err_path_);
}
void Child::signal(int sig) const {
    kill(pid_, sig);
}

ProcessResult Child::result() const {
    ProcessResult r;
    r.exit_code = done_ && WIFEXITED(status_) ? WEXITSTATUS(status_) : -1;
    r.out = out();
    r.err = err();
    return r;
}

}  // namespace memprotd::test
