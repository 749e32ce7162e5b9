#include "cli/commands.hpp"
namespace gilspy::cli {
Runner add_record_command(CLI::App& app) {
  app.add_subcommand("record", "Record");
  return [] { return 0; };
}
}  // namespace gilspy::cli
