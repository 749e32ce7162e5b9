#include "sampler/proc/task_syscall.hpp"

#include <cerrno>
#include <charconv>
#include <cstdio>

namespace gilspy::sampler {

namespace {
constexpr long kFutexSyscall = 202;  // x86-64

bool parse_number(std::string_view& text, uint64_t* out, int base) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  if (base == 16 && text.size() >= 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X'))
    text.remove_prefix(2);
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out, base);
  if (ec != std::errc()) return false;
  text.remove_prefix(static_cast<size_t>(ptr - text.data()));
  return true;
}
}  // namespace

const char* to_string(TaskState s) {
  switch (s) {
    case TaskState::kUnknown:
      return "unknown";
    case TaskState::kRunning:
      return "running";
    case TaskState::kGilCond:
      return "gil_cond";
    case TaskState::kGilMutex:
      return "gil_mutex";
    case TaskState::kSwitchWait:
      return "switch_wait";
    case TaskState::kOtherSyscall:
      return "other_syscall";
    case TaskState::kGone:
      return "gone";
  }
  return "unknown";
}

const char* syscall_name(long nr) {
  // x86-64 numbers (arch/x86/entry/syscalls/syscall_64.tbl)
  switch (nr) {
    case 0:
      return "read";
    case 1:
      return "write";
    case 7:
      return "poll";
    case 17:
      return "pread64";
    case 18:
      return "pwrite64";
    case 19:
      return "readv";
    case 20:
      return "writev";
    case 23:
      return "select";
    case 34:
      return "pause";
    case 35:
      return "nanosleep";
    case 42:
      return "connect";
    case 43:
      return "accept";
    case 44:
      return "sendto";
    case 45:
      return "recvfrom";
    case 46:
      return "sendmsg";
    case 47:
      return "recvmsg";
    case 61:
      return "wait4";
    case 72:
      return "fcntl";
    case 74:
      return "fsync";
    case 202:
      return "futex";
    case 230:
      return "clock_nanosleep";
    case 232:
      return "epoll_wait";
    case 247:
      return "waitid";
    case 270:
      return "pselect6";
    case 271:
      return "ppoll";
    case 281:
      return "epoll_pwait";
    case 288:
      return "accept4";
    case 299:
      return "recvmmsg";
    case 307:
      return "sendmmsg";
    case 441:
      return "epoll_pwait2";
    default:
      return nullptr;
  }
}

bool is_waiting_for_gil(TaskState s) {
  return s == TaskState::kGilCond || s == TaskState::kGilMutex;
}

TaskState classify_syscall(std::string_view text, uint64_t gil_addr, const layouts::GilLayout& gil) {
  if (text.rfind("running", 0) == 0) return TaskState::kRunning;
  if (!text.empty() && text[0] == '-') return TaskState::kOtherSyscall;  // blocked, not in a syscall
  uint64_t nr = 0, addr = 0;
  if (!parse_number(text, &nr, 10)) return TaskState::kUnknown;
  if (nr != kFutexSyscall) return TaskState::kOtherSyscall;
  if (!parse_number(text, &addr, 16)) return TaskState::kUnknown;
  auto inside = [&](uint32_t off, uint32_t size) {
    return addr >= gil_addr + off && addr < gil_addr + off + size;
  };
  if (inside(gil.cond, gil.cond_size)) return TaskState::kGilCond;
  if (inside(gil.mutex, gil.mutex_size)) return TaskState::kGilMutex;
  if (inside(gil.switch_cond, gil.switch_cond_size) || inside(gil.switch_mutex, gil.switch_mutex_size)) {
    return TaskState::kSwitchWait;
  }
  return TaskState::kOtherSyscall;
}

TaskState TaskSyscallFile::read(uint64_t gil_addr, const layouts::GilLayout& gil) {
  char buf[160];
  const ssize_t n = file_.read(buf, sizeof buf - 1);
  last_nr_ = -1;
  if (n <= 0) return (n < 0 && (errno == ESRCH || errno == ENOENT)) ? TaskState::kGone : TaskState::kUnknown;
  std::string_view text(buf, static_cast<size_t>(n));
  if (uint64_t nr = 0; !text.empty() && text[0] != 'r' && text[0] != '-' && parse_number(text, &nr, 10)) {
    last_nr_ = static_cast<long>(nr);
  }
  return classify_syscall(std::string_view(buf, static_cast<size_t>(n)), gil_addr, gil);
}

}  // namespace gilspy::sampler
