// Type and text for every painter of app/charts (xy charts, Gantt charts, heatmaps): fonts sized
// in pixels, Qt Charts' rich text, word wrap of titles (wrap_words, the public one, and the
// limited and rich variants), title lines drawn centred, and the size Qt Charts gives a text.
#include <QFontMetricsF>
#include <QGraphicsTextItem>
#include <QPainter>
#include <QTextDocument>
#include <algorithm>
#include <cmath>

#include "chart_render_internal.hpp"

namespace attnres::charts {

QStringList wrap_words(const QString& text, const QFontMetricsF& metrics, double width) {
  QStringList lines;
  QString line;
  for (const QString& word : text.split(' ', Qt::SkipEmptyParts)) {
    const QString candidate = line.isEmpty() ? word : line + ' ' + word;
    if (!line.isEmpty() && metrics.horizontalAdvance(candidate) > width) {
      lines.push_back(line);
      line = word;
    } else {
      line = candidate;
    }
  }
  if (!line.isEmpty() || lines.isEmpty()) lines.push_back(line);
  return lines;
}

}  // namespace attnres::charts

namespace attnres::charts::detail {

QFont pixel_font(QFont font) {
  const double points =
      font.pointSizeF() > 0 ? font.pointSizeF() : font.pixelSize() / kPixelsPerPoint;
  font.setPixelSize(std::max(1, static_cast<int>(std::lround(points * kPixelsPerPoint))));
  return font;
}

QFont font_of_pixels(double pixels, int smallest) {
  QFont font;
  font.setPixelSize(std::max(smallest, static_cast<int>(std::lround(pixels))));
  return font;
}

QFont scaled(QFont font, double points) {
  font.setPointSizeF(std::max(1.0, points));
  return font;
}

QString rich(const QString& plain) {
  return plain.toHtmlEscaped();
}

QString wrapped_rich(const QString& text, const QFont& font, double width, int most) {
  const QFontMetricsF metrics(font);
  if (width <= 20 || metrics.horizontalAdvance(text) <= width) return rich(text);
  QStringList lines = wrap_words(text, metrics, width);
  if (lines.size() > most) {
    const QString tail = lines.mid(most - 1).join(' ');
    lines = lines.mid(0, most - 1);
    lines.push_back(tail);
  }
  for (QString& line : lines) line = rich(line);
  return lines.join("<br>");
}

QStringList first_lines(const QStringList& lines, const QFontMetricsF& metrics, double width,
                        int most) {
  if (lines.size() <= most) return lines;
  QStringList kept = lines.mid(0, most);
  kept.back() = metrics.elidedText(lines.mid(most - 1).join(' '), Qt::ElideRight, width);
  return kept;
}

void draw_title_lines(QPainter& painter, const QStringList& lines, const QFont& font, double left,
                      double top, double width) {
  painter.setFont(font);
  painter.setPen(Qt::black);
  const double line = QFontMetricsF(font).lineSpacing();
  for (qsizetype i = 0; i < lines.size(); ++i) {
    painter.drawText(QRectF(left, top + static_cast<double>(i) * line, width, line),
                     Qt::AlignHCenter | Qt::AlignVCenter, lines[i]);
  }
}

QSizeF qt_text_size(const QFont& font, const QString& html) {
  static QGraphicsTextItem* const item = [] {
    auto* text = new QGraphicsTextItem;  // never in a scene; lives as long as the process
    text->document()->setDocumentMargin(0.5);
    return text;
  }();
  item->setFont(font);
  item->setHtml(html);
  return item->boundingRect().size();
}

}  // namespace attnres::charts::detail
