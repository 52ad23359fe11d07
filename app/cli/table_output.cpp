// The cost-engine commands' table output (table_output.hpp).
#include "table_output.hpp"

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "attnres/error.hpp"
#include "attnres/output_schema.hpp"
#include "cli.hpp"
#include "text_table.hpp"

namespace attnres::cli {

void add_table_format_option(po::options_description& options, TableFormat& flags,
                             bool choose_table) {
  options.add_options()("format", po::value(&flags.format)->default_value("table"),
                        "table | markdown | json | csv");
  if (choose_table) {
    options.add_options()("table", po::value(&flags.table),
                          "with --format csv: the table to print (one table per stream; the "
                          "command's --help and its JSON list the table ids)");
  }
}

void require_table_format(const TableFormat& flags) {
  require_format(flags.format, {"table", "markdown", "json", "csv"});
  if (!flags.table.empty() && flags.format != "csv")
    throw UsageError(
        "--table chooses the table of --format csv; give --format csv or leave "
        "--table out (--format " +
        flags.format + " prints every table)");
}

void print_tables(std::ostream& out, const std::vector<ReportTable>& tables) {
  for (const auto& table : tables) {
    out << table.title << "\n";
    TextTable text(table.header);
    for (const auto& row : table.rows) text.add_row(row);
    text.print(out);
    if (!table.note.empty()) {  // wrapped to the table's 120 columns
      TextTable note({table.note});
      std::ostringstream wrapped;
      note.print(wrapped, 118);
      std::istringstream lines(wrapped.str());
      for (std::string line; std::getline(lines, line);) out << "  " << line << "\n";
    }
    out << "\n";
  }
}

std::string markdown_cell(const std::string& cell) {
  std::string out;
  for (char c : cell) {
    if (c == '|')
      out += "\\|";
    else if (c == '\n')
      out += ' ';
    else
      out += c;
  }
  return out;
}

void print_markdown_tables(std::ostream& out, const std::vector<ReportTable>& tables) {
  for (const auto& table : tables) {
    out << "### " << markdown_cell(table.title) << "\n\n|";
    for (const auto& cell : table.header) out << " " << markdown_cell(cell) << " |";
    out << "\n|";
    for (std::size_t i = 0; i < table.header.size(); ++i) {
      // Numbers right-aligned, text (names, formulas, reasons) left-aligned.
      bool numeric = i > 0;
      for (const auto& row : table.rows) {
        if (i >= row.size() || row[i].empty()) continue;
        char* end = nullptr;
        std::strtod(row[i].c_str(), &end);
        if (end != row[i].c_str() + row[i].size()) numeric = false;
      }
      out << (numeric ? "---:|" : "---|");
    }
    out << "\n";
    for (const auto& row : table.rows) {
      out << "|";
      for (const auto& cell : row) out << " " << markdown_cell(cell) << " |";
      out << "\n";
    }
    if (!table.note.empty()) out << "\n" << table.note << "\n";
    out << "\n";
  }
}

namespace {

const ReportTable& chosen_table(const std::vector<ReportTable>& tables, const std::string& id) {
  std::string ids;
  for (const auto& table : tables) {
    if (table.id == id || (id.empty() && tables.size() == 1)) return table;
    ids += (ids.empty() ? "" : ", ") + table.id;
  }
  if (id.empty())
    throw UsageError("--format csv prints one table per stream and this command has " +
                     std::to_string(tables.size()) + ": give --table NAME, one of " + ids);
  throw UsageError("--table: no table '" + id + "' here; expected one of " + ids);
}

}  // namespace

void print_in_format(std::ostream& out, const std::vector<ReportTable>& tables,
                     const TableFormat& flags, const JsonEnvelope& envelope) {
  if (flags.format == "json") {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& table : tables) list.push_back(table_json(table));
    const nlohmann::json root = {
        {"schema", schema_tag(envelope.schema)}, {"inputs", envelope.inputs}, {"tables", list}};
    out << root.dump(2) << "\n";
  } else if (flags.format == "csv") {
    out << table_csv(chosen_table(tables, flags.table));
  } else if (flags.format == "markdown") {
    print_markdown_tables(out, tables);
  } else {
    print_tables(out, tables);
  }
}

}  // namespace attnres::cli
