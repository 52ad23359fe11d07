// animated_gif (gif_export.hpp): PNG frames decoded with Qt, encoded with giflib's streaming
// encoder into memory (the caller writes the bytes atomically). Each frame gets its own palette:
// exact when the frame has at most 256 colours (a heatmap's flat cells, its text and its colour
// bar usually do not: giflib's median cut then picks 256), so no frame is dithered.
#include "gif_export.hpp"

#include <QImage>
#include <QString>
#include <algorithm>
#include <cstdint>
#include <memory>
#include <unordered_map>

#include "attnres/error.hpp"

#if ATTNRES_HAVE_GIFLIB
#include <gif_lib.h>
#endif

namespace attnres::charts {

bool gif_supported() {
  return ATTNRES_HAVE_GIFLIB != 0;
}

#if ATTNRES_HAVE_GIFLIB

namespace {

// A frame as palette indices and its palette (a power of two of colours, at least 2).
struct IndexedFrame {
  std::vector<GifByteType> pixels;  // (height, width), row-major
  std::vector<GifColorType> palette;
};

// The exact palette of `image` when it has at most 256 colours, else giflib's median cut.
IndexedFrame index_frame(const QImage& image) {
  const int width = image.width(), height = image.height();
  const auto count = static_cast<std::size_t>(width) * static_cast<std::size_t>(height);
  IndexedFrame frame;
  frame.pixels.resize(count);
  std::unordered_map<QRgb, GifByteType> index;
  bool exact = true;
  for (int y = 0; y < height && exact; ++y) {
    const auto* row = reinterpret_cast<const QRgb*>(image.constScanLine(y));
    for (int x = 0; x < width; ++x) {
      const QRgb colour = row[x] & 0xFFFFFFu;
      auto found = index.find(colour);
      if (found == index.end()) {
        if (index.size() == 256) {
          exact = false;
          break;
        }
        found = index.emplace(colour, static_cast<GifByteType>(index.size())).first;
        frame.palette.push_back({static_cast<GifByteType>(qRed(colour)),
                                 static_cast<GifByteType>(qGreen(colour)),
                                 static_cast<GifByteType>(qBlue(colour))});
      }
      frame.pixels[static_cast<std::size_t>(y) * static_cast<std::size_t>(width) +
                   static_cast<std::size_t>(x)] = found->second;
    }
  }
  if (!exact) {
    std::vector<GifByteType> red(count), green(count), blue(count);
    for (int y = 0; y < height; ++y) {
      const auto* row = reinterpret_cast<const QRgb*>(image.constScanLine(y));
      for (int x = 0; x < width; ++x) {
        const std::size_t i = static_cast<std::size_t>(y) * static_cast<std::size_t>(width) +
                              static_cast<std::size_t>(x);
        red[i] = static_cast<GifByteType>(qRed(row[x]));
        green[i] = static_cast<GifByteType>(qGreen(row[x]));
        blue[i] = static_cast<GifByteType>(qBlue(row[x]));
      }
    }
    int colours = 256;
    frame.palette.assign(256, GifColorType{0, 0, 0});
    if (GifQuantizeBuffer(static_cast<unsigned>(width), static_cast<unsigned>(height), &colours,
                          red.data(), green.data(), blue.data(), frame.pixels.data(),
                          frame.palette.data()) != GIF_OK) {
      throw Error("GIF: giflib could not reduce a frame to 256 colours");
    }
  }
  std::size_t size = 2;  // a GIF palette holds a power of two of colours
  while (size < frame.palette.size()) size *= 2;
  frame.palette.resize(size, GifColorType{0, 0, 0});
  return frame;
}

int append_bytes(GifFileType* gif, const GifByteType* data, int length) {
  static_cast<std::string*>(gif->UserData)
      ->append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(length));
  return length;
}

struct MapDeleter {
  void operator()(ColorMapObject* map) const { GifFreeMapObject(map); }
};

// Throws with giflib's reason when `status` is not GIF_OK.
void check(GifFileType* gif, int status, const char* step) {
  if (status == GIF_OK) return;
  std::string message = "GIF: ";
  message += step;
  message += " failed: ";
  const char* reason = GifErrorString(gif->Error);
  message += reason != nullptr ? reason : "unknown giflib error";
  throw Error(message);
}

}  // namespace

std::string animated_gif(const std::vector<std::filesystem::path>& frames, int delay_ms,
                         const Progress& progress) {
  if (frames.empty()) throw Error("GIF: no frames");
  std::string bytes;
  int error = 0;
  GifFileType* gif = EGifOpen(&bytes, append_bytes, &error);
  if (gif == nullptr) {
    const char* reason = GifErrorString(error);
    throw Error(std::string("GIF: giflib could not start an encoder: ") +
                (reason != nullptr ? reason : "unknown error"));
  }
  // Closed on every exit (EGifCloseFile frees it and writes the trailer on success).
  auto close = [](GifFileType* file) {
    int ignored = 0;
    EGifCloseFile(file, &ignored);
  };
  std::unique_ptr<GifFileType, decltype(close)> owner(gif, close);
  EGifSetGifVersion(gif, true);  // GIF89a: delays and looping

  QSize size;
  for (std::size_t k = 0; k < frames.size(); ++k) {
    const QImage image =
        QImage(QString::fromStdString(frames[k].string())).convertToFormat(QImage::Format_RGB32);
    if (image.isNull()) throw Error("GIF: cannot read the frame '" + frames[k].string() + "'");
    if (k == 0) {
      size = image.size();
      check(gif, EGifPutScreenDesc(gif, size.width(), size.height(), 8, 0, nullptr),
            "the screen descriptor");
      // The NETSCAPE2.0 application extension: loop forever (count 0).
      check(gif, EGifPutExtensionLeader(gif, APPLICATION_EXT_FUNC_CODE), "the loop extension");
      check(gif, EGifPutExtensionBlock(gif, 11, "NETSCAPE2.0"), "the loop extension");
      const GifByteType loop[3] = {1, 0, 0};
      check(gif, EGifPutExtensionBlock(gif, 3, loop), "the loop extension");
      check(gif, EGifPutExtensionTrailer(gif), "the loop extension");
    } else if (image.size() != size) {
      throw Error("GIF: frame '" + frames[k].string() + "' has another size than the first");
    }
    IndexedFrame indexed = index_frame(image);
    GraphicsControlBlock control{};
    control.DisposalMode = DISPOSE_DO_NOT;
    control.UserInputFlag = false;
    control.DelayTime = std::max(2, (delay_ms + 5) / 10);  // hundredths of a second
    control.TransparentColor = NO_TRANSPARENT_COLOR;
    GifByteType extension[4];
    const auto length = EGifGCBToExtension(&control, extension);
    check(gif, EGifPutExtension(gif, GRAPHICS_EXT_FUNC_CODE, static_cast<int>(length), extension),
          "a frame's delay");
    const std::unique_ptr<ColorMapObject, MapDeleter> palette(
        GifMakeMapObject(static_cast<int>(indexed.palette.size()), indexed.palette.data()));
    if (!palette) throw Error("GIF: giflib could not make a palette");
    check(gif, EGifPutImageDesc(gif, 0, 0, size.width(), size.height(), false, palette.get()),
          "an image descriptor");
    for (int y = 0; y < size.height(); ++y) {
      check(gif,
            EGifPutLine(gif,
                        indexed.pixels.data() +
                            static_cast<std::size_t>(y) * static_cast<std::size_t>(size.width()),
                        size.width()),
            "a frame's pixels");
    }
    report_progress(progress, k + 1, frames.size(), "animated GIF");
  }
  GifFileType* done = owner.release();
  if (EGifCloseFile(done, &error) != GIF_OK) {
    const char* reason = GifErrorString(error);
    throw Error(std::string("GIF: finishing the file failed: ") +
                (reason != nullptr ? reason : "unknown giflib error"));
  }
  return bytes;
}

#else

std::string animated_gif(const std::vector<std::filesystem::path>&, int, const Progress&) {
  throw Error(
      "this attnres was built without giflib: no animated GIF (install libgif-dev and configure "
      "again)");
}

#endif

}  // namespace attnres::charts
