// How the cost-engine commands print their ReportTables (attnres/report.hpp): the terminal table
// (TextTable, notes wrapped to its 120 columns), Markdown, CSV (each table) or JSON (every table).
// An internal header of the CLI.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "attnres/report.hpp"
#include "options.hpp"

namespace attnres::cli {

// --format of the commands that print their tables with print_in_format: table (the default) |
// markdown | json | csv, and (`choose_table`) --table NAME, the one table --format csv prints.
struct TableFormat {
  std::string format;
  std::string table;  // --table: a table id; empty when not given
};
void add_table_format_option(po::options_description& options, TableFormat& flags,
                             bool choose_table = true);
// A UsageError unless `format` is one of those (require_format), or --table is given without
// --format csv.
void require_table_format(const TableFormat& flags);

// Each table as a titled terminal table, its note wrapped below it.
void print_tables(std::ostream& out, const std::vector<ReportTable>& tables);
// A Markdown table cell: '|' escaped, line breaks as spaces.
std::string markdown_cell(const std::string& cell);
// Each table as "### title", a Markdown table (numeric columns right-aligned) and its note.
void print_markdown_tables(std::ostream& out, const std::vector<ReportTable>& tables);
// What a JSON output is and what it was computed from: the schema name of kOutputSchemas
// (output_schema.hpp) and the inputs (model, hardware, ...) that change its numbers.
struct JsonEnvelope {
  std::string schema;
  nlohmann::json inputs;
};
// `tables` in --format: the terminal table, Markdown, JSON ({schema, inputs, tables: every table's
// typed form, table_json}) or CSV of one table (table_csv): the only one, or the one --table
// names (a UsageError listing the tables when there are several and none is named, or an unknown
// one is).
void print_in_format(std::ostream& out, const std::vector<ReportTable>& tables,
                     const TableFormat& flags, const JsonEnvelope& envelope);

}  // namespace attnres::cli
