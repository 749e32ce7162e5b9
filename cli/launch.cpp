#include "cli/launch.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "base/clock.hpp"
#include "base/error.hpp"
#include "sampler/target/attach.hpp"

namespace gilspy::cli {

pid_t launch(const std::vector<std::string>& command, bool stdout_to_stderr) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw Error(ErrorKind::kIo, std::string("pipe: ") + std::strerror(errno));
  const pid_t child = ::fork();
  if (child < 0) throw Error(ErrorKind::kIo, std::string("fork: ") + std::strerror(errno));
  if (child == 0) {
    ::signal(SIGPIPE, SIG_DFL);  // gilspy ignores it (main.cpp); an ignored signal would stay so across exec
    if (stdout_to_stderr && ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
      const int err = errno;
      (void)!::write(fds[1], &err, sizeof err);
      ::_exit(127);
    }
    std::vector<char*> argv;
    for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    const int err = errno;
    (void)!::write(fds[1], &err, sizeof err);
    ::_exit(127);
  }
  ::close(fds[1]);
  int err = 0;
  const ssize_t n = ::read(fds[0], &err, sizeof err);
  ::close(fds[0]);
  if (n == sizeof err) {
    ::waitpid(child, nullptr, 0);
    throw Error(ErrorKind::kUsage, "cannot run " + command[0] + ": " + std::strerror(err));
  }
  return child;
}

int exit_status_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

sampler::Interpreter attach_launched(pid_t child, sampler::RemoteMemoryReader& reader, double timeout_s,
                                     const std::string& program, std::optional<int>* child_status) {
  const int64_t deadline = gilspy::monotonic_ns() + static_cast<int64_t>(timeout_s * 1e9);
  while (true) {
    int status = 0;
    if (::waitpid(child, &status, WNOHANG) == child) {
      *child_status = status;
      throw Error(ErrorKind::kNoSuchProcess, program + " exited (status " +
                                                 std::to_string(exit_status_of(status)) +
                                                 ") before its Python interpreter could be found");
    }
    try {
      return sampler::attach(child, reader,
                             {.timeout_s = 0.05, .retry_interval_s = 0.0005, .wait_for_python = true});
    } catch (const Error& e) {
      const bool retry = e.kind() == ErrorKind::kNotPython || e.kind() == ErrorKind::kNotReady ||
                         e.kind() == ErrorKind::kNoSuchProcess || e.kind() == ErrorKind::kBadAddress;
      if (!retry) throw;
      if (gilspy::monotonic_ns() >= deadline) {
        throw Error(e.kind(), program + " (pid " + std::to_string(child) +
                                  ") did not start a Python interpreter within " +
                                  fmt::format("{:g}", timeout_s) + " s: " + e.what());
      }
    }
  }
}

}  // namespace gilspy::cli
