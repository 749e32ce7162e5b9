// ThreadDump (sampler/stacks/thread_dump.hpp), the reader behind `gilspy dump`: every thread's stack as text,
// threading's names by ident, and what it says when there is no stack to read.
#include <doctest/doctest.h>

#include "sampler/stacks/thread_dump.hpp"
#include "support/fake_session.hpp"

using namespace gilspy;
using gilspy::testing::FakeSession;
using gilspy::testing::location_table;

namespace unit_thread_dump {

TEST_CASE("thread dump: each thread's frames innermost first, with threading's names") {
  FakeSession s;
  auto& py = s.py;
  const uint64_t outer = py.code("main", "/srv/app.py", 1, location_table(1, {3, 4}), 2);
  const uint64_t inner =
      py.code("Handler.wait_for", "/srv/handler.py", 40, location_table(40, {41, 42, 47}), 3);
  const uint64_t f_outer = py.frame(outer, py.instr(outer, 1), 0);
  const uint64_t ts_busy = py.tstate(py.frame(inner, py.instr(inner, 2), f_outer));
  const uint64_t ts_idle = py.tstate(0);  // a thread with no Python frame
  const uint64_t a = py.instance({{"_name", py.str("handler-1")}});
  const uint64_t active = py.dict({{py.integer(0x7fa0), a}}, false);
  const uint64_t threading = py.module(py.dict({{py.str("_active"), active}}));
  py.put(s.interp_addr, py.l.interp_modules, py.dict({{py.str("threading"), threading}}));

  sampler::ThreadDump dump(s.interp, py.mem);
  const auto busy = dump.stack(ts_busy);
  REQUIRE(busy.read);
  REQUIRE(busy.frames.size() == 2);
  CHECK(busy.frames[0].function == "Handler.wait_for");
  CHECK(busy.frames[0].file == "/srv/handler.py");
  CHECK(busy.frames[0].line == 47);
  CHECK(busy.frames[1].function == "main");
  CHECK(busy.frames[1].line == 4);
  CHECK_FALSE(busy.truncated);
  const auto idle = dump.stack(ts_idle);
  CHECK(idle.read);
  CHECK(idle.frames.empty());
  const auto names = dump.python_names();
  REQUIRE(names.size() == 1);
  CHECK(names.at(0x7fa0) == "handler-1");
}

TEST_CASE("thread dump: no threading module, an unreadable stack, a version without stacks") {
  FakeSession s;
  auto& py = s.py;
  py.put(s.interp_addr, py.l.interp_modules, py.dict({{py.str("sys"), 1}}));
  sampler::ThreadDump dump(s.interp, py.mem);
  CHECK(dump.python_names().empty());
  // A thread state whose frame pointer points at unmapped memory: said, not shown as an empty stack.
  const uint64_t ts = py.tstate(0xdead0000);
  const auto torn = dump.stack(ts);
  CHECK_FALSE(torn.read);
  CHECK_FALSE(torn.why.empty());
  sampler::Interpreter unknown = s.interp;
  unknown.stack_layout.known = false;
  sampler::ThreadDump without(unknown, py.mem);
  const auto none = without.stack(ts);
  CHECK_FALSE(none.read);
  CHECK(none.why.find("does not read stacks") != std::string::npos);
  CHECK(without.python_names().empty());
}

}  // namespace unit_thread_dump
