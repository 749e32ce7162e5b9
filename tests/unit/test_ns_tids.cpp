// Namespace tids: the NSpid line, and the translator outside a namespace (inside one: e2e pid_namespace).
#include <doctest/doctest.h>
#include <unistd.h>

#include "sampler/proc/ns_tids.hpp"

using gilspy::sampler::innermost_nspid;
using gilspy::sampler::NamespaceTids;

TEST_CASE("ns_tids: the innermost id of a status file's NSpid line") {
  const char* nested = "Name:\tpython3\nTgid:\t4242\nPid:\t4243\nNSpid:\t4243\t17\t3\nNSsid:\t1\n";
  CHECK(innermost_nspid(nested) == 3);
  CHECK(innermost_nspid("Name:\tx\nNSpid:\t99\n") == 99);  // not in a namespace: our id
  CHECK(innermost_nspid("Name:\tx\nNSpid:\t99\t7") == 7);  // no newline at the end
  CHECK(innermost_nspid("Name:\tx\nPid:\t99\n") == 0);     // old kernels: no NSpid
  CHECK(innermost_nspid("Name:\tx\nNSpid:\tabc\n") == 0);
  CHECK(innermost_nspid("Name:\tx\nNSpid:\t99999999999\n") == 0);  // not an int32
  CHECK(innermost_nspid("NSpid:\t5\n") == 0);  // only matched at a line start after the first
}

TEST_CASE("ns_tids: this process is in our namespace, so its ids pass through") {
  NamespaceTids ns(::getpid());
  CHECK_FALSE(ns.translating());
  CHECK(ns.to_host(::gettid()) == ::gettid());
  CHECK(ns.to_namespace(1234) == 1234);
}
