# Generates a header holding one text file as a string constant NAME (calibration table).
file(READ "${INPUT}" content)
set(body "// Generated from ${INPUT_NAME} by cmake/embed_text.cmake.\n#pragma once\nnamespace attnres {\ninline constexpr const char* ${NAME} = R\"attnres_text(${content})attnres_text\";\n}  // namespace attnres\n")
file(WRITE "${OUTPUT}.tmp" "${body}")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
