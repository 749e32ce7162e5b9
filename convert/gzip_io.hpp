#pragma once
// Reading a file that may be gzip-compressed, and writing one that should be: framework profilers write their
// traces as .json or .json.gz (PyTorch's profiler with use_gzip, HTA's test data), and a merged trace goes
// back in the form it came in. zlib (Debian's zlib1g-dev) does the work; both sides stream, so memory stays a
// few buffers whatever the file's size.
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/output_file.hpp"

namespace gilspy::convert {

// Whether `path` names a gzip file by its name (ends in ".gz"): how an output's form is chosen.
bool has_gzip_suffix(const std::string& path);

// How far a compressed input may expand: past `min_bytes` out, `max_ratio` times what was read in. JSON from
// a profiler compresses 10-30 times; a gzip bomb (204 KB to 5 GB) thousands of times.
struct ExpansionLimit {
  uint64_t min_bytes = uint64_t{1} << 30;
  uint64_t max_ratio = 1000;
};

// A file's bytes, decompressed when it starts with gzip's magic bytes (1f 8b), whatever its name; otherwise
// as they are. Concatenated gzip members read as one stream, as gunzip reads them.
class InputBytes {
 public:
  // Throws Error(kIo) naming the file when it cannot be opened.
  explicit InputBytes(const std::string& path, ExpansionLimit limit = {});
  ~InputBytes();
  InputBytes(const InputBytes&) = delete;
  InputBytes& operator=(const InputBytes&) = delete;

  // Up to `n` bytes into `buf`; 0 at the end. Throws Error(kIo) for a read error, Error(kBadInput) for a gzip
  // stream that is damaged or cut short, or that expands past the limit (naming the file).
  size_t read(char* buf, size_t n);
  bool compressed() const { return compressed_; }
  const std::string& path() const { return path_; }

 private:
  size_t read_raw(char* buf, size_t n);
  std::string path_;
  ExpansionLimit limit_;
  uint64_t read_in_ = 0;  // compressed bytes read from the file
  uint64_t put_out_ = 0;  // decompressed bytes handed out
  int fd_ = -1;
  bool compressed_ = false;
  bool stream_done_ = false;  // the last gzip member ended; more input may start another
  bool eof_ = false;
  struct Inflater;
  std::unique_ptr<Inflater> z_;
  std::string in_;  // compressed bytes read from the file and not yet consumed
  size_t in_pos_ = 0;
};

// Text into an output file (base/output_file.hpp: unnamed until complete, never through a link), compressed
// as gzip when asked. Nothing is left behind unless commit() is reached.
class OutputBytes {
 public:
  // Throws Error(kIo) as OutputFile::temporary does.
  OutputBytes(const std::string& path, mode_t mode, bool gzip);
  ~OutputBytes();
  OutputBytes(const OutputBytes&) = delete;
  OutputBytes& operator=(const OutputBytes&) = delete;

  void write(std::string_view data);               // throws Error(kIo)
  void commit();                                   // ends the gzip stream, names the file; throws Error(kIo)
  uint64_t bytes_in() const { return bytes_in_; }  // uncompressed bytes written

 private:
  void deflate_out(std::string_view data, bool finish);
  OutputFile file_;
  bool gzip_;
  struct Deflater;
  std::unique_ptr<Deflater> z_;
  uint64_t bytes_in_ = 0;
};

}  // namespace gilspy::convert
