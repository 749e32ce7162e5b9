// gilspy: who holds CPython's GIL, who waits for it, thread by thread, from outside the process.
#include <csignal>
#include <cstdio>
#include <map>
#include <optional>
#include <string>

#include "base/error.hpp"
#include "base/terminal_text.hpp"
#include "cli/commands.hpp"
#include "gilspy_version.hpp"

// A free-threaded target without a GIL is not an error of gilspy or of the user: scripts can tell it apart.
constexpr int kExitNoGil = 3;

namespace {

using Runners = std::map<const CLI::App*, gilspy::cli::Runner>;

// Every subcommand, each with the function that runs it once parsing succeeded.
Runners add_commands(CLI::App& app) {
  Runners runners;
  for (auto add :
       {gilspy::cli::add_info_command, gilspy::cli::add_dump_command, gilspy::cli::add_record_command,
        gilspy::cli::add_top_command, gilspy::cli::add_convert_command, gilspy::cli::add_check_command}) {
    const size_t before = app.get_subcommands({}).size();
    auto runner = add(app);
    runners[app.get_subcommands({})[before]] = std::move(runner);
  }
  return runners;
}

bool is_command(CLI::App& app, const char* name) {
  for (const auto* sub : app.get_subcommands({})) {
    if (sub->get_name() == name) return true;
  }
  return false;
}

// "info, record, ...": every command, in the order --help lists them, so that the error never goes stale.
std::string command_names(CLI::App& app) {
  std::string names;
  for (const auto* sub : app.get_subcommands({})) names += (names.empty() ? "" : ", ") + sub->get_name();
  return names;
}

// Parses the arguments; the exit code when that is the end (help, the version, a wrong argument).
std::optional<int> parse_arguments(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string where = "gilspy";
    for (const auto* sub : app.get_subcommands()) where += " " + sub->get_name();
    std::fprintf(stderr, "gilspy: error: %s (see '%s --help')\n",
                 gilspy::escape_for_terminal(e.what()).c_str(), where.c_str());
    return 2;
  }
  return std::nullopt;
}

// Runs the command parsed; its errors become a line on stderr and an exit code here.
int run_command(CLI::App& app, const Runners& runners) {
  try {
    for (const auto* sub : app.get_subcommands()) return runners.at(sub)();
    return 2;
  } catch (const gilspy::Error& e) {
    // Messages name target text (a command, a binary's path): escaped like everything else we print.
    std::fprintf(stderr, "gilspy: error: %s\n", gilspy::escape_for_terminal(e.what()).c_str());
    if (e.kind() == gilspy::ErrorKind::kNoGil) return kExitNoGil;
    return e.kind() == gilspy::ErrorKind::kUsage ? 2 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gilspy: internal error: %s\n", gilspy::escape_for_terminal(e.what()).c_str());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  // A closed stdout (`gilspy record ... | head`) must end only the printing, never a recording half-way
  // through writing its files: writes then fail with EPIPE, which the printers treat as "stop printing". A
  // launched program gets the default back (cli/launch.cpp).
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{
      "gilspy: see who holds CPython's GIL and who waits for it, from outside the process.\n"
      "Reads a running interpreter's memory (process_vm_readv); needs ptrace permission on the target.",
      "gilspy"};
  app.set_version_flag("-V,--version", gilspy::kGilspyVersion);
  app.require_subcommand(1);
  app.fallthrough(false);
  const Runners runners = add_commands(app);
  if (argc > 1 && argv[1][0] != '-' && !is_command(app, argv[1])) {
    std::fprintf(stderr, "gilspy: error: unknown command '%s' (commands: %s; see 'gilspy --help')\n",
                 gilspy::escape_for_terminal(argv[1]).c_str(), command_names(app).c_str());
    return 2;
  }
  if (const std::optional<int> code = parse_arguments(app, argc, argv)) return *code;
  return run_command(app, runners);
}
