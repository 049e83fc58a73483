# embed.cmake — turn a data file into a C source: const char SYM[]; const size_t SYM_len.
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR bytes "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
file(WRITE ${OUT} "/* generated from ${IN} by scripts/embed.cmake */\n#include <stddef.h>\nconst char ${SYM}[] = {${body}0x00};\nconst size_t ${SYM}_len = ${bytes};\n")
