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
  // x86-64 numbers (arch/x86/entry/syscalls/syscall_64.tbl): the calls a blocked thread is usually in.
  struct Named {
    long nr;
    const char* name;
  };
  static constexpr Named kCalls[] = {
      {0, "read"},         {1, "write"},         {7, "poll"},
      {17, "pread64"},     {18, "pwrite64"},     {19, "readv"},
      {20, "writev"},      {23, "select"},       {34, "pause"},
      {35, "nanosleep"},   {42, "connect"},      {43, "accept"},
      {44, "sendto"},      {45, "recvfrom"},     {46, "sendmsg"},
      {47, "recvmsg"},     {61, "wait4"},        {72, "fcntl"},
      {74, "fsync"},       {202, "futex"},       {230, "clock_nanosleep"},
      {232, "epoll_wait"}, {247, "waitid"},      {270, "pselect6"},
      {271, "ppoll"},      {281, "epoll_pwait"}, {288, "accept4"},
      {299, "recvmmsg"},   {307, "sendmmsg"},    {441, "epoll_pwait2"},
  };
  for (const Named& c : kCalls) {
    if (c.nr == nr) return c.name;
  }
  return nullptr;
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
