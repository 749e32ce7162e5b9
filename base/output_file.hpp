#pragma once
// Creating the files gilspy writes, safely in a folder that other users can write to.
//
// gilspy often runs as root with -o pointing at a shared folder (/tmp), and its file names are predictable
// (GIL_<pid>_rank_<rank>.json.partial, ...). A link planted at one of those names must never redirect a
// write, and a name in use must never be written through. So:
//   - The folder is opened once, name by name (open_output_dir()): a link in its path is followed only when
//   root
//     or gilspy's user made it (-o /var/run is /run), never one another user planted (/tmp/x -> /etc, even
//     where fs.protected_symlinks is off), and the folder must be root's or gilspy's user's. Every later step
//     is relative to that open folder.
//   - Inside it, gilspy never opens an existing name for writing. A file is created unnamed (O_TMPFILE) or
//   under
//     a random name with O_CREAT|O_EXCL|O_NOFOLLOW, and only given its name with linkat (which fails rather
//     than follows when the name exists) or renameat (which replaces a directory entry, never writes through
//     it).
//   - A final name that already exists is replaced only when it is a regular file owned by gilspy's effective
//     user (a file of an earlier run); a link, a directory, a device or another user's file is left alone and
//     reported.
// Files are created with mode 0600 unless asked otherwise: they hold the target's command line.
#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.hpp"

namespace gilspy {

inline constexpr mode_t kDefaultOutputMode = 0600;

// strerror in lower case, to end a sentence: "no space left on device", "read-only file system".
std::string errno_text(int errnum);

// The output folder `dir` opened (O_PATH), walked name by name: a symbolic link on the way is followed only
// when root or the user running gilspy (or sudo's invoker) owns it, and the folder itself must belong to one
// of them. Throws Error(kIo) saying which name was refused and why. The caller closes the descriptor.
int open_output_dir(const std::string& dir);

// "0644" -> 0644; nullopt for what is not an octal mode of at most 0777.
std::optional<mode_t> parse_file_mode(std::string_view text);

class OutputFile {
 public:
  // A file that becomes `final_path` at commit(): until then unnamed (O_TMPFILE), or where the file system
  // cannot do that under a random `<final>.<hex>.tmp`. Not committed, it is removed (destructor, discard()).
  // Throws Error(kIo) when the folder cannot be written to, or when `final_path` exists and is not a file
  // that commit() may replace (checked now, so that a long run does not fail at its end).
  static OutputFile temporary(const std::string& final_path, mode_t mode = kDefaultOutputMode);

  // A file that exists under `path` from its first byte on (the .partial of a recording, so that a killed run
  // leaves it), exclusively flock()ed while this object holds it. Throws Error(kBusy) when another process
  // holds the file under that name (another gilspy writing the same file), Error(kIo) when the name is taken
  // by anything else (a link, another user's file, an earlier run's leftover) or cannot be created. The file
  // stays when the object is destroyed uncommitted; discard() removes it.
  static OutputFile named(const std::string& path, mode_t mode = kDefaultOutputMode);

  // Throws Error(kIo) when `path` exists and is not a file that a commit may replace (see above).
  static void check_replaceable(const std::string& path);

  OutputFile(OutputFile&& other) noexcept;
  OutputFile& operator=(OutputFile&& other) noexcept;
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();

  // Writes as much of `data` as the file system takes; returns the number of bytes written. Sets `*error`
  // (an errno value) when it stopped short; 0 otherwise.
  size_t write_some(std::string_view data, int* error);
  // Writes all of `data` or throws Error(kIo) naming the file.
  void write_all(std::string_view data);

  // Closes the file and gives it its final name: `final_path` (temporary()), or the one passed here (named():
  // the .partial becomes the final file). Throws Error(kIo); then the file is removed (temporary()) or stays
  // under its current name (named()).
  void commit(const std::string& final_path = {});
  // Closes and removes the file (whatever name it has now).
  void discard() noexcept;

  // Where the file is now, for messages: its name in the folder, or while unnamed the final name it is for.
  const std::string& path() const { return path_; }

 private:
  OutputFile() = default;
  void close_quietly() noexcept;
  void discard_temp_name(std::string& temp_name) noexcept;

  int dir_fd_ = -1;
  int fd_ = -1;
  std::string dir_;         // as given, for messages
  std::string name_;        // current name in the folder; "" while unnamed (O_TMPFILE)
  std::string final_name_;  // temporary(): the name commit() gives it
  std::string path_;
  bool remove_uncommitted_ = true;
};

}  // namespace gilspy
