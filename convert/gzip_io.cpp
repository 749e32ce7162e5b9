#include "convert/gzip_io.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/error.hpp"

namespace gilspy::convert {
namespace {

constexpr size_t kChunk = size_t{1} << 16;

}  // namespace

bool has_gzip_suffix(const std::string& path) {
  return path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
}

struct InputBytes::Inflater {
  z_stream s{};
  bool ready = false;
  ~Inflater() {
    if (ready) inflateEnd(&s);
  }
};

InputBytes::InputBytes(const std::string& path, ExpansionLimit limit) : path_(path), limit_(limit) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw Error(ErrorKind::kIo, "cannot open " + path + ": " + errno_text(errno));
  // The magic decides, not the name: a profiler's .json may be compressed and a .gz may not be.
  in_.resize(kChunk);
  const size_t got = read_raw(in_.data(), in_.size());
  in_.resize(got);
  compressed_ =
      got >= 2 && static_cast<unsigned char>(in_[0]) == 0x1f && static_cast<unsigned char>(in_[1]) == 0x8b;
  if (compressed_) {
    z_ = std::make_unique<Inflater>();
    if (inflateInit2(&z_->s, 15 + 16) != Z_OK)
      throw Error(ErrorKind::kIo, "zlib could not start for " + path);
    z_->ready = true;
  }
}

InputBytes::~InputBytes() {
  if (fd_ >= 0) ::close(fd_);
}

size_t InputBytes::read_raw(char* buf, size_t n) {
  size_t total = 0;
  while (total < n) {
    const ssize_t r = ::read(fd_, buf + total, n - total);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw Error(ErrorKind::kIo, "cannot read " + path_ + ": " + errno_text(errno));
    }
    if (r == 0) {
      eof_ = true;
      break;
    }
    total += static_cast<size_t>(r);
  }
  read_in_ += total;
  return total;
}

size_t InputBytes::read(char* buf, size_t n) {
  if (!compressed_) {
    // The first chunk was read to look at the magic bytes: hand it out first.
    if (in_pos_ < in_.size()) {
      const size_t k = std::min(n, in_.size() - in_pos_);
      std::memcpy(buf, in_.data() + in_pos_, k);
      in_pos_ += k;
      return k;
    }
    return eof_ ? 0 : read_raw(buf, n);
  }
  if (n == 0) return 0;
  z_stream& s = z_->s;
  s.next_out = reinterpret_cast<Bytef*>(buf);
  s.avail_out = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
  while (s.avail_out == static_cast<uInt>(std::min<size_t>(n, 1u << 30))) {
    if (in_pos_ == in_.size()) {
      if (eof_) {
        if (!stream_done_) throw Error(ErrorKind::kBadInput, path_ + ": the gzip stream is cut short");
        break;
      }
      in_.resize(kChunk);
      in_.resize(read_raw(in_.data(), in_.size()));
      in_pos_ = 0;
      if (in_.empty()) continue;
    }
    if (stream_done_) {
      // Another gzip member follows the one that ended (as `cat a.gz b.gz` makes); gunzip reads on.
      if (inflateReset(&s) != Z_OK) throw Error(ErrorKind::kBadInput, path_ + ": damaged gzip stream");
      stream_done_ = false;
    }
    s.next_in = reinterpret_cast<Bytef*>(in_.data() + in_pos_);
    s.avail_in = static_cast<uInt>(in_.size() - in_pos_);
    const int rc = inflate(&s, Z_NO_FLUSH);
    in_pos_ = in_.size() - s.avail_in;
    if (rc == Z_STREAM_END) {
      stream_done_ = true;
    } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
      throw Error(ErrorKind::kBadInput,
                  path_ + ": damaged gzip stream (" + (s.msg ? s.msg : "zlib error") + ")");
    }
  }
  const size_t out = std::min<size_t>(n, 1u << 30) - s.avail_out;
  put_out_ += out;
  if (put_out_ > limit_.min_bytes && put_out_ / limit_.max_ratio > read_in_) {
    throw Error(ErrorKind::kBadInput, path_ + ": its gzip stream expands more than " +
                                          std::to_string(limit_.max_ratio) + " times (" +
                                          std::to_string(put_out_ >> 20) + " MiB from " +
                                          std::to_string(read_in_ >> 10) +
                                          " KiB so far): not a trace a profiler wrote; refusing it");
  }
  return out;
}

struct OutputBytes::Deflater {
  z_stream s{};
  bool ready = false;
  ~Deflater() {
    if (ready) deflateEnd(&s);
  }
};

OutputBytes::OutputBytes(const std::string& path, mode_t mode, bool gzip)
    : file_(OutputFile::temporary(path, mode)), gzip_(gzip) {
  if (gzip_) {
    z_ = std::make_unique<Deflater>();
    // Level 6 as gzip(1) by default; windowBits 15 + 16: a gzip header and trailer.
    if (deflateInit2(&z_->s, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
      throw Error(ErrorKind::kIo, "zlib could not start for " + path);
    }
    z_->ready = true;
  }
}

OutputBytes::~OutputBytes() = default;

void OutputBytes::write(std::string_view data) {
  bytes_in_ += data.size();
  if (!gzip_) {
    file_.write_all(data);
    return;
  }
  deflate_out(data, false);
}

void OutputBytes::deflate_out(std::string_view data, bool finish) {
  z_stream& s = z_->s;
  s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  s.avail_in = static_cast<uInt>(data.size());
  char buf[kChunk];
  for (;;) {
    s.next_out = reinterpret_cast<Bytef*>(buf);
    s.avail_out = sizeof buf;
    const int rc = deflate(&s, finish ? Z_FINISH : Z_NO_FLUSH);
    if (rc == Z_STREAM_ERROR) throw Error(ErrorKind::kIo, "zlib failed compressing " + file_.path());
    const size_t produced = sizeof buf - s.avail_out;
    if (produced > 0) file_.write_all(std::string_view(buf, produced));
    if (finish ? rc == Z_STREAM_END : (s.avail_in == 0 && s.avail_out != 0)) break;
  }
}

void OutputBytes::commit() {
  if (gzip_) deflate_out({}, true);
  file_.commit();
}

}  // namespace gilspy::convert
