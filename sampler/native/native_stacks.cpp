#include "sampler/native/native_stacks.hpp"

#include <cxxabi.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "base/clock.hpp"
#include "base/error.hpp"
#include "elfutils/elf_image.hpp"

namespace gilspy::sampler {
namespace {

// Handed to find_elf through each module's userdata (libdwfl has no other way to reach the caller).
struct Context {
  pid_t pid = 0;
};

// A module's file, opened as the process sees it without following a link and checked to be a regular file
// (what a FIFO or a device planted at a library's path would otherwise make gilspy, as root, read or hang
// on); [vdso] and deleted files go to libdwfl's own reader, which copies them out of the process's memory.
int find_elf_safely(Dwfl_Module* mod, void** userdata, const char* name, Dwarf_Addr base, char** file_name,
                    Elf** elfp) {
  const auto* ctx = static_cast<const Context*>(*userdata);
  const std::string path = name != nullptr ? name : "";
  if (ctx == nullptr || path.empty() || path[0] != '/' || path.find(" (deleted)") != std::string::npos) {
    return dwfl_linux_proc_find_elf(mod, userdata, name, base, file_name, elfp);
  }
  std::string why;
  const int fd = elf::open_file_in_process(ctx->pid, path, &why, /*nonblocking=*/true);
  if (fd < 0) return -1;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return -1;
  }
  *file_name = ::strdup(path.c_str());
  return fd;
}

// No separate debug files: their paths come from the target's binaries and would be looked up on the host.
int no_debuginfo(Dwfl_Module*, void**, const char*, Dwarf_Addr, const char*, const char*, GElf_Word, char**) {
  return -1;
}

const Dwfl_Callbacks kCallbacks = {
    .find_elf = find_elf_safely,
    .find_debuginfo = no_debuginfo,
    .section_address = nullptr,
    .debuginfo_path = nullptr,
};

struct DwflClose {
  void operator()(Dwfl* d) const { dwfl_end(d); }
};

int set_context(Dwfl_Module*, void** userdata, const char*, Dwarf_Addr, void* ctx) {
  *userdata = ctx;
  return DWARF_CB_OK;
}

// Each module's ELF, symbol table and unwind tables, loaded before any thread is stopped: loaded lazily, the
// first thread's stop took 9.4 ms instead of 0.3 ms (libpython's symbols).
int preload(Dwfl_Module* mod, void**, const char*, Dwarf_Addr, void*) {
  Dwarf_Addr bias = 0;
  dwfl_module_getsymtab(mod);
  dwfl_module_eh_cfi(mod, &bias);
  return DWARF_CB_OK;
}

std::string demangled(const char* name) {
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> out(abi::__cxa_demangle(name, nullptr, nullptr, &status),
                                                  &std::free);
  return status == 0 && out ? std::string(out.get()) : std::string(name);
}

std::string last_component(const char* path) {
  if (path == nullptr) return {};
  const char* slash = std::strrchr(path, '/');
  return slash != nullptr ? slash + 1 : path;
}

struct Walk {
  Dwfl* dwfl;
  NativeStack* out;
  int max_depth;
};

// One frame: its pc named by the symbol that covers it (the call's own address, pc - 1, for a return
// address, so that a call at a function's end is not named after the next function).
int on_frame(Dwfl_Frame* frame, void* arg) {
  Walk& w = *static_cast<Walk*>(arg);
  Dwarf_Addr pc = 0;
  bool activation = false;
  if (!dwfl_frame_pc(frame, &pc, &activation)) return DWARF_CB_ABORT;
  if (static_cast<int>(w.out->frames.size()) >= w.max_depth) {
    w.out->truncated = true;
    return DWARF_CB_ABORT;
  }
  const Dwarf_Addr at = activation ? pc : pc - 1;
  NativeFrame f{.pc = pc};
  if (Dwfl_Module* m = dwfl_addrmodule(w.dwfl, at)) {
    f.module =
        last_component(dwfl_module_info(m, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr));
    GElf_Off offset = 0;
    GElf_Sym sym;
    if (const char* name = dwfl_module_addrinfo(m, at, &offset, &sym, nullptr, nullptr, nullptr)) {
      f.function = demangled(name);
      f.offset = pc - (at - offset);
    }
  }
  w.out->frames.push_back(std::move(f));
  return DWARF_CB_OK;
}

// The process's modules reported and the unwinder attached (threads are stopped only as each is unwound).
std::unique_ptr<Dwfl, DwflClose> attach(pid_t pid, Context* ctx) {
  std::unique_ptr<Dwfl, DwflClose> dwfl(dwfl_begin(&kCallbacks));
  if (!dwfl) throw Error(ErrorKind::kUnavailable, std::string("libdwfl: ") + dwfl_errmsg(-1));
  const std::string who = "process " + std::to_string(pid);
  if (const int err = dwfl_linux_proc_report(dwfl.get(), pid); err != 0) {
    throw Error(err == ENOENT || err == ESRCH ? ErrorKind::kNoSuchProcess : ErrorKind::kIo,
                who + ": cannot read its mapped files for native stacks: " +
                    (err > 0 ? std::strerror(err) : dwfl_errmsg(-1)));
  }
  dwfl_report_end(dwfl.get(), nullptr, nullptr);
  dwfl_getmodules(dwfl.get(), set_context, ctx, 0);
  dwfl_getmodules(dwfl.get(), preload, nullptr, 0);
  if (const int err = dwfl_linux_proc_attach(dwfl.get(), pid, false); err != 0) {
    throw Error(ErrorKind::kPermission,
                who + ": cannot attach with ptrace to read native stacks (" +
                    (err > 0 ? std::strerror(err) : dwfl_errmsg(-1)) +
                    "): --native needs root or CAP_SYS_PTRACE, and no debugger attached");
  }
  return dwfl;
}

}  // namespace

std::vector<NativeStack> read_native_stacks(pid_t pid, const std::vector<int64_t>& tids, int max_depth) {
  Context ctx{.pid = pid};
  const auto dwfl = attach(pid, &ctx);
  std::vector<NativeStack> out;
  for (const int64_t tid : tids) {
    NativeStack s{.tid = tid};
    Walk w{.dwfl = dwfl.get(), .out = &s, .max_depth = max_depth};
    const int64_t t0 = monotonic_ns();
    const int rc = dwfl_getthread_frames(dwfl.get(), static_cast<pid_t>(tid), on_frame, &w);
    s.stopped_ns = monotonic_ns() - t0;
    // -1 after some frames: the unwinder found no rule for the next one (code without CFI), which ends many
    // native stacks; said only when nothing was unwound.
    if (rc == -1 && s.frames.empty()) s.error = dwfl_errmsg(-1);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace gilspy::sampler
