// A report table as a Qt item model (report_table_model.hpp).
#include "report_table_model.hpp"

namespace attnres::gui {

void ReportTableModel::set_table(ReportTable table) {
  beginResetModel();
  table_ = std::move(table);
  endResetModel();
}

int ReportTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(table_.rows.size());
}

int ReportTableModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(table_.header.size());
}

bool ReportTableModel::numeric(int column) const {
  const auto c = static_cast<std::size_t>(column);
  if (c < table_.columns.size())
    return table_.columns[c].shown != Shown::text && table_.columns[c].shown != Shown::yes_no;
  return column > 0;
}

QVariant ReportTableModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid()) return {};
  const auto r = static_cast<std::size_t>(index.row());
  const auto c = static_cast<std::size_t>(index.column());
  if (r >= table_.rows.size() || c >= table_.rows[r].size()) return {};
  switch (role) {
    case Qt::DisplayRole:
      return QString::fromStdString(table_.rows[r][c]);
    case Qt::TextAlignmentRole:
      return numeric(index.column()) ? QVariant(Qt::AlignRight | Qt::AlignVCenter)
                                     : QVariant(Qt::AlignLeft | Qt::AlignVCenter);
    case Qt::ToolTipRole: {
      QString tip = QString::fromStdString(table_.rows[r][c]);
      if (!table_.title.empty()) tip += "\n" + QString::fromStdString(table_.title);
      return tip;
    }
    default:
      return {};
  }
}

QVariant ReportTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (role != Qt::DisplayRole || orientation != Qt::Horizontal) return {};
  const auto c = static_cast<std::size_t>(section);
  return c < table_.header.size() ? QVariant(QString::fromStdString(table_.header[c])) : QVariant();
}

}  // namespace attnres::gui
