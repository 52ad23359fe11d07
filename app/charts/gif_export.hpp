// Animated GIFs of rendered frames (`attnres animate`'s animation.gif), encoded with giflib
// (Debian's libgif-dev), the one GIF encoder of the project. giflib is optional at configure time:
// a build without it has gif_supported() false and writes no GIF (the frames are still written).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "attnres/cancel.hpp"

namespace attnres::charts {

// Whether this build encodes GIFs (giflib was found when it was configured).
bool gif_supported();

// The bytes of an animated GIF (GIF89a, looping forever) of the PNG files `frames`, in order,
// each shown for `delay_ms` milliseconds (rounded to the GIF's hundredths of a second, at least
// 2). Every frame must have the size of the first. A frame of at most 256 colours keeps them
// exactly (its own palette); one of more is reduced to 256 by giflib's median-cut quantiser.
// `progress` is called after each frame (Ctrl-C stops it: Cancelled). Throws attnres::Error when a
// PNG does not decode, the sizes differ, giflib fails, or gif_supported() is false.
std::string animated_gif(const std::vector<std::filesystem::path>& frames, int delay_ms,
                         const Progress& progress = {});

}  // namespace attnres::charts
