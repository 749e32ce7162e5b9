#include "cli/commands.hpp"
namespace gilspy::cli {
Runner add_convert_command(CLI::App& app) {
  app.add_subcommand("convert", "Convert raw recordings to Chrome Trace JSON");
  return [] { return 0; };
}
}  // namespace gilspy::cli
