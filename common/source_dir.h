// The checkout this binary was built from (dashboards, experiments and the migrations' text
// are found through it). Defined in a source file CMake generates into the build folder, so
// the absolute path sits in one translation unit and on no compile line: a second clone
// with a warm ccache recompiles only that unit.
#pragma once

namespace headlab {

// Returns the absolute path of the source tree at configure time.
const char* SourceDir();

}  // namespace headlab
