#include "base/proc_events.hpp"

#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/netlink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>

namespace gilspy {
namespace {

// What one message of the connector carries: the netlink header, the connector header and a proc_event.
constexpr size_t kEventOffset = NLMSG_HDRLEN + sizeof(cn_msg);

bool subscribe(int fd) {
  // nlmsghdr, cn_msg (whose data[] is the operation), proc_cn_mcast_op: laid out by hand, as cn_msg ends in a
  // flexible array.
  alignas(nlmsghdr) char msg[NLMSG_HDRLEN + sizeof(cn_msg) + sizeof(proc_cn_mcast_op)] = {};
  nlmsghdr nl{};
  nl.nlmsg_len = sizeof msg;
  nl.nlmsg_type = NLMSG_DONE;
  nl.nlmsg_pid = 0;
  cn_msg cn{};
  cn.id.idx = CN_IDX_PROC;
  cn.id.val = CN_VAL_PROC;
  cn.len = sizeof(proc_cn_mcast_op);
  const proc_cn_mcast_op op = PROC_CN_MCAST_LISTEN;
  std::memcpy(msg, &nl, sizeof nl);
  std::memcpy(msg + NLMSG_HDRLEN, &cn, sizeof cn);
  std::memcpy(msg + NLMSG_HDRLEN + sizeof cn, &op, sizeof op);
  return ::send(fd, msg, sizeof msg, 0) == static_cast<ssize_t>(sizeof msg);
}

// One proc_event from a message's bytes; false for the events gilspy does not follow (and threads' clones).
bool decode(const proc_event& e, ProcEvent* out) {
  switch (e.what) {
    case proc_event::PROC_EVENT_FORK:
      if (e.event_data.fork.child_pid != e.event_data.fork.child_tgid) return false;  // a new thread
      *out = {.kind = ProcEvent::Kind::kFork,
              .pid = e.event_data.fork.child_tgid,
              .parent = e.event_data.fork.parent_tgid,
              .ts_ns = static_cast<int64_t>(e.timestamp_ns)};
      return true;
    case proc_event::PROC_EVENT_EXEC:
      *out = {.kind = ProcEvent::Kind::kExec,
              .pid = e.event_data.exec.process_tgid,
              .parent = 0,
              .ts_ns = static_cast<int64_t>(e.timestamp_ns)};
      return true;
    case proc_event::PROC_EVENT_EXIT:
      if (e.event_data.exit.process_pid != e.event_data.exit.process_tgid) return false;  // a thread ended
      *out = {.kind = ProcEvent::Kind::kExit,
              .pid = e.event_data.exit.process_tgid,
              .parent = 0,
              .ts_ns = static_cast<int64_t>(e.timestamp_ns)};
      return true;
    default:
      return false;
  }
}

}  // namespace

ProcEvents::~ProcEvents() {
  if (fd_ >= 0) ::close(fd_);
}

bool ProcEvents::open() {
  const int fd = ::socket(AF_NETLINK, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_CONNECTOR);
  if (fd < 0) return false;
  sockaddr_nl addr{};
  addr.nl_family = AF_NETLINK;
  addr.nl_groups = CN_IDX_PROC;
  addr.nl_pid = 0;  // the kernel picks a unique port id
  // Every process of the machine is reported, and they are read every 50 ms (and not at all while a session
  // attaches): room for bursts. A smaller buffer (rmem_max) is still a buffer; lost events are said.
  const int bytes = 4 << 20;
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof bytes) != 0) {
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || !subscribe(fd)) {
    ::close(fd);
    return false;
  }
  fd_ = fd;
  return true;
}

bool ProcEvents::read(const std::function<void(const ProcEvent&)>& on_event) {
  if (fd_ < 0) return true;
  alignas(nlmsghdr) char buf[8192];
  bool complete = true;
  for (;;) {
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == ENOBUFS) {  // the kernel dropped events: go on reading what is queued after them
        complete = false;
        continue;
      }
      return complete;  // EAGAIN: nothing more queued
    }
    size_t len = static_cast<size_t>(n);
    for (auto* nl = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(nl, len); nl = NLMSG_NEXT(nl, len)) {
      // The event's header and its fork/exec/exit fields must be there; a shorter event is not one of them.
      constexpr size_t kNeeded = offsetof(proc_event, event_data) + sizeof(proc_event::event_data.fork);
      if (nl->nlmsg_len < kEventOffset + kNeeded) continue;
      proc_event e{};
      std::memcpy(&e, reinterpret_cast<const char*>(nl) + kEventOffset,
                  std::min<size_t>(sizeof e, nl->nlmsg_len - kEventOffset));
      ProcEvent out;
      if (decode(e, &out)) on_event(out);
    }
  }
}

}  // namespace gilspy
