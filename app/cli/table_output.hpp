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
// markdown | json | csv.
void add_table_format_option(po::options_description& options, std::string& format);
// A UsageError unless `format` is one of those (require_format).
void require_table_format(const std::string& format);

// Each table as a titled terminal table, its note wrapped below it.
void print_tables(std::ostream& out, const std::vector<ReportTable>& tables);
// A Markdown table cell: '|' escaped, line breaks as spaces.
std::string markdown_cell(const std::string& cell);
// Each table as "### title", a Markdown table (numeric columns right-aligned) and its note.
void print_markdown_tables(std::ostream& out, const std::vector<ReportTable>& tables);
// `tables` in --format `format`: table | markdown | json | csv.
void print_in_format(std::ostream& out, const std::vector<ReportTable>& tables,
                     const std::string& format);

}  // namespace attnres::cli
