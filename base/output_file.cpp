#include "base/output_file.hpp"

#include <fcntl.h>
#include <stdio.h>  // renameat2, RENAME_NOREPLACE (glibc >= 2.28)
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <utility>
#include <vector>

namespace gilspy {

std::string errno_text(int e) {
  std::string s = std::strerror(e);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

namespace {

bool trusted_owner(uid_t uid) {
  if (uid == 0 || uid == ::geteuid() || uid == ::getuid()) return true;
  // Run through sudo, the invoker is the user sudo was called by.
  const char* sudo_uid = ::getenv("SUDO_UID");
  return sudo_uid != nullptr && ::geteuid() == 0 && std::to_string(uid) == sudo_uid;
}

std::string owner_text(uid_t uid) {
  return "uid " + std::to_string(uid);
}

// `path` split at '/' into its names ("" and "." left out), appended to `out` in order.
void push_names(const std::string& path, std::vector<std::string>& out) {
  size_t at = 0;
  while (at <= path.size()) {
    size_t slash = path.find('/', at);
    if (slash == std::string::npos) slash = path.size();
    std::string name = path.substr(at, slash - at);
    if (!name.empty() && name != ".") out.push_back(std::move(name));
    at = slash + 1;
  }
}

}  // namespace

int open_output_dir(const std::string& dir) {
  constexpr int kMaxLinks = 40;  // as the kernel's path walk (ELOOP)
  int fd = ::open(!dir.empty() && dir[0] == '/' ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw Error(ErrorKind::kIo, errno_text(errno));
  std::vector<std::string> todo;  // names still to walk, the next last
  push_names(dir, todo);
  std::reverse(todo.begin(), todo.end());
  std::string walked = !dir.empty() && dir[0] == '/' ? "" : ".";
  int links = 0;
  auto fail = [&fd](const std::string& why) {
    ::close(fd);
    throw Error(ErrorKind::kIo, why);
  };
  while (!todo.empty()) {
    const std::string name = std::move(todo.back());
    todo.pop_back();
    const std::string here = walked + "/" + name;
    struct stat st {};
    if (::fstatat(fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) fail(here + ": " + errno_text(errno));
    if (S_ISLNK(st.st_mode)) {
      // A link is followed only when root or the user running gilspy made it: one that another user planted
      // (in /tmp, say) would send root's files where that user chose, whatever fs.protected_symlinks says.
      if (!trusted_owner(st.st_uid)) {
        fail(here + " is a symbolic link of another user (" + owner_text(st.st_uid) +
             "): gilspy does not follow it (give the folder it points to, if you trust it)");
      }
      if (++links > kMaxLinks) fail(here + ": too many levels of symbolic links");
      char target[4096];
      const ssize_t n = ::readlinkat(fd, name.c_str(), target, sizeof target - 1);
      if (n < 0) fail(here + ": " + errno_text(errno));
      const std::string to(target, static_cast<size_t>(n));
      std::vector<std::string> names;
      push_names(to, names);
      for (auto it = names.rbegin(); it != names.rend(); ++it) todo.push_back(*it);
      if (to[0] == '/') {
        const int root = ::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0) fail(errno_text(errno));
        ::close(fd);
        fd = root;
        walked = "";
      }
      continue;
    }
    if (!S_ISDIR(st.st_mode)) fail(here + " is not a folder");
    const int next = ::openat(fd, name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0) fail(here + ": " + errno_text(errno));
    ::close(fd);
    fd = next;
    walked = here;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(errno_text(errno));
  if (!trusted_owner(st.st_uid)) {
    // Another user's folder is theirs to plant names in and to swap under us.
    fail("the folder " + dir + " belongs to another user (" + owner_text(st.st_uid) +
         "): gilspy writes only into folders of root or of the user running it");
  }
  return fd;
}

namespace {

struct SplitPath {
  std::string dir;  // "." when the path has no folder
  std::string name;
};

SplitPath split(const std::string& path) {
  const size_t slash = path.rfind('/');
  SplitPath p;
  if (slash == std::string::npos) {
    p = {".", path};
  } else {
    p = {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
  }
  if (p.name.empty() || p.name == "." || p.name == "..") {
    throw Error(ErrorKind::kIo, "cannot write " + path + ": not a file name");
  }
  return p;
}

// The folder as the user named it: see open_output_dir().
int open_dir(const std::string& dir, const std::string& for_path) {
  try {
    return open_output_dir(dir);
  } catch (const Error& e) {
    throw Error(ErrorKind::kIo, "cannot create " + for_path + ": " + e.what());
  }
}

std::string random_suffix() {
  unsigned char bytes[6] = {};
  if (::getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) {
    // No entropy source: time and pid still make a collision unlikely, and O_EXCL makes it harmless.
    const uint64_t v =
        static_cast<uint64_t>(::getpid()) * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(time(nullptr));
    std::memcpy(bytes, &v, sizeof bytes);
  }
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (unsigned char b : bytes) {
    s += kHex[b >> 4];
    s += kHex[b & 15];
  }
  return s;
}

// Why the entry `name` must not be replaced; "" when it is absent or a regular file of our effective user.
std::string why_not_replaceable(int dir_fd, const std::string& name) {
  struct stat st {};
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return errno == ENOENT ? "" : "cannot be checked (" + errno_text(errno) + ")";
  }
  if (S_ISLNK(st.st_mode)) return "is a symbolic link";
  if (!S_ISREG(st.st_mode)) return "is not a regular file";
  if (st.st_uid != ::geteuid()) return "belongs to another user (uid " + std::to_string(st.st_uid) + ")";
  return "";
}

std::string refusal(const std::string& path, const std::string& why) {
  return path + " already exists and " + why +
         ": gilspy never writes through or replaces such an entry in its output folder (remove it, or choose "
         "another folder)";
}

// A new regular file in the folder, unnamed when the file system allows, else under a random name.
// Returns the fd; `*name` is "" for an unnamed file.
int create_fresh(int dir_fd, const std::string& base_name, mode_t mode, const std::string& for_path,
                 std::string* name) {
  int fd = ::openat(dir_fd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, mode);
  if (fd >= 0) {
    name->clear();
  } else if (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL || errno == ENOENT) {
    // No O_TMPFILE here (some network and FUSE file systems).
    for (int attempt = 0; fd < 0 && attempt < 16; ++attempt) {
      *name = base_name + "." + random_suffix() + ".tmp";
      fd = ::openat(dir_fd, name->c_str(), O_CREAT | O_EXCL | O_NOFOLLOW | O_WRONLY | O_CLOEXEC, mode);
      if (fd < 0 && errno != EEXIST) break;
    }
  }
  if (fd < 0) throw Error(ErrorKind::kIo, "cannot create " + for_path + ": " + errno_text(errno));
  // The mode asked for, whatever the umask: it is at most as open as the caller chose.
  if (::fchmod(fd, mode) != 0) {
    const int e = errno;
    ::close(fd);
    if (!name->empty()) ::unlinkat(dir_fd, name->c_str(), 0);
    throw Error(ErrorKind::kIo, "cannot set the mode of " + for_path + ": " + errno_text(e));
  }
  return fd;
}

// Gives the open file `fd` the name `name` in the folder; fails with EEXIST (never follows) when it is taken.
bool link_unnamed(int fd, int dir_fd, const std::string& name) {
  if (::linkat(fd, "", dir_fd, name.c_str(), AT_EMPTY_PATH) == 0) return true;
  if (errno != ENOENT && errno != EPERM) return false;  // AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH
  const std::string self = "/proc/self/fd/" + std::to_string(fd);
  return ::linkat(AT_FDCWD, self.c_str(), dir_fd, name.c_str(), AT_SYMLINK_FOLLOW) == 0;
}

}  // namespace

std::optional<mode_t> parse_file_mode(std::string_view text) {
  if (text.empty() || text.size() > 4) return std::nullopt;
  mode_t m = 0;
  for (char c : text) {
    if (c < '0' || c > '7') return std::nullopt;
    m = m * 8 + static_cast<mode_t>(c - '0');
  }
  if (m > 0777) return std::nullopt;
  return m;
}

void OutputFile::check_replaceable(const std::string& path) {
  const SplitPath p = split(path);
  const int dir_fd = open_dir(p.dir, path);
  const std::string why = why_not_replaceable(dir_fd, p.name);
  ::close(dir_fd);
  if (!why.empty()) throw Error(ErrorKind::kIo, refusal(path, why));
}

OutputFile OutputFile::temporary(const std::string& final_path, mode_t mode) {
  const SplitPath p = split(final_path);
  OutputFile f;
  f.dir_ = p.dir;
  f.final_name_ = p.name;
  f.path_ = final_path;  // for messages while it is unnamed: the name it is being written for
  f.dir_fd_ = open_dir(p.dir, final_path);
  if (const std::string why = why_not_replaceable(f.dir_fd_, p.name); !why.empty()) {
    throw Error(ErrorKind::kIo, refusal(final_path, why));
  }
  f.fd_ = create_fresh(f.dir_fd_, p.name, mode, f.path_, &f.name_);
  if (!f.name_.empty()) f.path_ = p.dir + "/" + f.name_;
  return f;
}

OutputFile OutputFile::named(const std::string& path, mode_t mode) {
  const SplitPath p = split(path);
  OutputFile f;
  f.dir_ = p.dir;
  f.path_ = path;
  f.remove_uncommitted_ = false;
  f.dir_fd_ = open_dir(p.dir, path);
  // Created and locked before it gets its name, so that nobody ever sees the name unlocked.
  std::string temp_name;
  f.fd_ = create_fresh(f.dir_fd_, p.name, mode, path, &temp_name);
  if (::flock(f.fd_, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    f.discard_temp_name(temp_name);
    throw Error(ErrorKind::kIo, "cannot lock " + path + ": " + errno_text(e));
  }
  for (int attempt = 0; attempt < 3; ++attempt) {
    const bool linked = temp_name.empty()
                            ? link_unnamed(f.fd_, f.dir_fd_, p.name)
                            : ::linkat(f.dir_fd_, temp_name.c_str(), f.dir_fd_, p.name.c_str(), 0) == 0;
    if (linked) {
      f.discard_temp_name(temp_name);
      f.name_ = p.name;
      return f;
    }
    const int e = errno;
    if (e != EEXIST) {
      f.discard_temp_name(temp_name);
      throw Error(ErrorKind::kIo, "cannot create " + path + ": " + errno_text(e));
    }
    // Taken: by another gilspy writing it now (it holds the lock), or by something that must stay as it is.
    if (const std::string why = why_not_replaceable(f.dir_fd_, p.name); !why.empty()) {
      f.discard_temp_name(temp_name);
      throw Error(ErrorKind::kIo, refusal(path, why));
    }
    const int other = ::openat(f.dir_fd_, p.name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (other < 0) {
      if (errno == ENOENT) continue;  // gone meanwhile (renamed by its writer): try again
      const int e2 = errno;
      f.discard_temp_name(temp_name);
      throw Error(ErrorKind::kIo,
                  "cannot create " + path + ": it exists and cannot be read (" + errno_text(e2) + ")");
    }
    const bool locked_by_other = ::flock(other, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    ::close(other);
    f.discard_temp_name(temp_name);
    if (locked_by_other) throw Error(ErrorKind::kBusy, path + " is being written by another process");
    throw Error(ErrorKind::kIo, path +
                                    " already exists, left by a run that did not finish; gilspy does not "
                                    "overwrite it (convert it with 'gilspy convert -i " +
                                    path + "', or remove it)");
  }
  f.discard_temp_name(temp_name);
  throw Error(ErrorKind::kIo, "cannot create " + path + ": the name keeps changing under gilspy");
}

void OutputFile::discard_temp_name(std::string& temp_name) noexcept {
  if (!temp_name.empty()) ::unlinkat(dir_fd_, temp_name.c_str(), 0);
  temp_name.clear();
}

OutputFile::OutputFile(OutputFile&& o) noexcept {
  *this = std::move(o);
}

OutputFile& OutputFile::operator=(OutputFile&& o) noexcept {
  if (this != &o) {
    if (remove_uncommitted_) discard();
    close_quietly();
    dir_fd_ = std::exchange(o.dir_fd_, -1);
    fd_ = std::exchange(o.fd_, -1);
    dir_ = std::move(o.dir_);
    name_ = std::move(o.name_);
    final_name_ = std::move(o.final_name_);
    path_ = std::move(o.path_);
    remove_uncommitted_ = o.remove_uncommitted_;
  }
  return *this;
}

OutputFile::~OutputFile() {
  if (remove_uncommitted_) discard();
  close_quietly();
}

void OutputFile::close_quietly() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (dir_fd_ >= 0) ::close(dir_fd_);
  dir_fd_ = -1;
}

size_t OutputFile::write_some(std::string_view data, int* error) {
  *error = 0;
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd_, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      *error = errno;
      break;
    }
    if (n == 0) {
      *error = ENOSPC;
      break;
    }
    done += static_cast<size_t>(n);
  }
  return done;
}

void OutputFile::write_all(std::string_view data) {
  int e = 0;
  write_some(data, &e);
  if (e != 0) throw Error(ErrorKind::kIo, "cannot write " + path_ + ": " + errno_text(e));
}

void OutputFile::commit(const std::string& final_path) {
  std::string to_name = final_name_;
  std::string to_path = dir_ + "/" + final_name_;
  if (!final_path.empty()) {
    const SplitPath p = split(final_path);
    to_name = p.name;
    to_path = final_path;
  }
  if (name_.empty()) {
    // Unnamed (O_TMPFILE): it appears whole under its final name, or under a random one first when that name
    // is taken, to be renamed over it.
    if (link_unnamed(fd_, dir_fd_, to_name)) {
      name_ = to_name;
    } else {
      if (errno != EEXIST) throw Error(ErrorKind::kIo, "cannot create " + to_path + ": " + errno_text(errno));
      for (int attempt = 0; name_.empty() && attempt < 16; ++attempt) {
        const std::string candidate = to_name + "." + random_suffix() + ".tmp";
        if (link_unnamed(fd_, dir_fd_, candidate)) {
          name_ = candidate;
        } else if (errno != EEXIST) {
          throw Error(ErrorKind::kIo, "cannot create " + to_path + ": " + errno_text(errno));
        }
      }
      if (name_.empty()) throw Error(ErrorKind::kIo, "cannot create " + to_path + ": no free temporary name");
    }
  } else if (!remove_uncommitted_) {
    // named(): in a folder others can write to, make sure the name still holds our file before moving it.
    struct stat mine {
    }, there{};
    if (::fstat(fd_, &mine) != 0 || ::fstatat(dir_fd_, name_.c_str(), &there, AT_SYMLINK_NOFOLLOW) != 0 ||
        mine.st_dev != there.st_dev || mine.st_ino != there.st_ino) {
      throw Error(ErrorKind::kIo, "cannot rename " + path_ + " to " + to_path + ": " + path_ +
                                      " was replaced or removed by someone else during the run");
    }
  }
  if (name_ != to_name) {
    if (::renameat2(dir_fd_, name_.c_str(), dir_fd_, to_name.c_str(), RENAME_NOREPLACE) != 0) {
      if (errno != EEXIST && errno != EINVAL && errno != ENOSYS) {
        throw Error(ErrorKind::kIo, "cannot rename " + path_ + " to " + to_path + ": " + errno_text(errno));
      }
      if (const std::string why = why_not_replaceable(dir_fd_, to_name); !why.empty()) {
        throw Error(ErrorKind::kIo, refusal(to_path, why));
      }
      if (::renameat(dir_fd_, name_.c_str(), dir_fd_, to_name.c_str()) != 0) {
        throw Error(ErrorKind::kIo, "cannot rename " + path_ + " to " + to_path + ": " + errno_text(errno));
      }
    }
    name_ = to_name;
  }
  path_ = to_path;
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) {  // NFS and quotas may report a lost write only here
    const int e = errno;
    throw Error(ErrorKind::kIo, "cannot write " + to_path + ": " + errno_text(e));
  }
  name_.clear();  // committed: no longer ours to remove
  close_quietly();
}

void OutputFile::discard() noexcept {
  if (dir_fd_ >= 0 && !name_.empty()) ::unlinkat(dir_fd_, name_.c_str(), 0);
  name_.clear();
  close_quietly();
}

}  // namespace gilspy
