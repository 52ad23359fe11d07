// The cost-engine commands' table output (table_output.hpp).
#include "table_output.hpp"

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "text_table.hpp"

namespace attnres::cli {

void add_table_format_option(po::options_description& options, std::string& format) {
  options.add_options()("format", po::value(&format)->default_value("table"),
                        "table | markdown | json | csv");
}

void require_table_format(const std::string& format) {
  require_format(format, {"table", "markdown", "json", "csv"});
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

// The v2 commands' output: the terminal table, Markdown, CSV (one table) or JSON (every table).
nlohmann::json tables_json(const std::vector<ReportTable>& tables) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& table : tables) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& row : table.rows) {
      nlohmann::json entry = nlohmann::json::object();
      for (std::size_t i = 0; i < row.size() && i < table.header.size(); ++i)
        entry[table.header[i]] = row[i];
      rows.push_back(std::move(entry));
    }
    list.push_back(
        {{"id", table.id}, {"title", table.title}, {"rows", rows}, {"note", table.note}});
  }
  return {{"tables", list}};
}

}  // namespace

void print_in_format(std::ostream& out, const std::vector<ReportTable>& tables,
                     const std::string& format) {
  if (format == "json") {
    out << tables_json(tables).dump(2) << "\n";
  } else if (format == "csv") {
    for (const auto& table : tables) out << table_csv(table);
  } else if (format == "markdown") {
    print_markdown_tables(out, tables);
  } else {
    print_tables(out, tables);
  }
}

}  // namespace attnres::cli
