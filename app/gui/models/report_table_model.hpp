// A report table (report.hpp: the typed tables the CLI prints) as a Qt item model: its header,
// its rows as displayed (numbers right-aligned), the table's title and note as the tooltip of
// every cell. The views' tables show these models; tests read them without a window.
#pragma once

#include <QAbstractTableModel>

#include "attnres/report.hpp"

namespace attnres::gui {

class ReportTableModel : public QAbstractTableModel {
 public:
  explicit ReportTableModel(QObject* parent = nullptr) : QAbstractTableModel(parent) {}
  void set_table(ReportTable table);
  const ReportTable& table() const { return table_; }
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;
  // Whether column `column` holds numbers (right-aligned): its Shown kind, else every column but
  // the first.
  bool numeric(int column) const;

 private:
  ReportTable table_;
};

}  // namespace attnres::gui
