#pragma once
// One /proc/PID/task/TID/<name> file, opened when first read and then kept open (a pread from offset 0 per
// read). Opening lazily matters under thread churn: a server starting a thread per request ends most threads
// before anyone needs their files, and half of eager opens found the thread gone. Never allocates.
#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>

namespace gilspy::sampler {

class TaskFile {
 public:
  explicit TaskFile(const char* name) : name_(name) {}
  ~TaskFile() { close(); }
  TaskFile(const TaskFile&) = delete;
  TaskFile& operator=(const TaskFile&) = delete;
  TaskFile(TaskFile&& o) noexcept : name_(o.name_), pid_(o.pid_), tid_(o.tid_), fd_(o.fd_) { o.fd_ = -1; }

  // Points at another thread (tid 0: none); the file is opened by the next read.
  void reset(pid_t pid, int32_t tid) {
    close();
    pid_ = pid;
    tid_ = tid;
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  bool opened() { return open_now(); }
  bool is_open() const { return fd_ >= 0; }
  // The file's bytes from its start; -1 when it cannot be opened or read (errno says why: ESRCH or ENOENT
  // when the thread is gone).
  ssize_t read(char* buf, size_t size) { return open_now() ? ::pread(fd_, buf, size, 0) : -1; }

 private:
  bool open_now() {
    if (fd_ >= 0) return true;
    if (tid_ == 0) return false;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/task/%d/%s", static_cast<int>(pid_), static_cast<int>(tid_),
                  name_);
    fd_ = ::open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    return fd_ >= 0;
  }
  const char* name_;
  pid_t pid_ = 0;
  int32_t tid_ = 0;
  int fd_ = -1;
};

}  // namespace gilspy::sampler
