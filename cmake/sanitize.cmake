# STAGGER_SANITIZE: AddressSanitizer (with LeakSanitizer) and
# UndefinedBehaviorSanitizer, float-cast-overflow included, on every C target.
# Any report aborts the program, so ctest fails on it. Meant for clang (the
# `sanitize` preset in CMakePresets.json); CUDA and NCCL are better left off:
# ASan and the CUDA driver do not share an address space well, and no GPU
# test runs in CI. See docs/RELIABILITY.md.
option(STAGGER_SANITIZE "Build with ASan + UBSan (clang; see docs/RELIABILITY.md)" OFF)
set(STAGGER_SANITIZE_SUMMARY "off")
if(STAGGER_SANITIZE)
  set(STAGGER_SANITIZE_FLAGS
    -fsanitize=address,undefined,float-cast-overflow
    -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_compile_options("$<$<COMPILE_LANGUAGE:C>:${STAGGER_SANITIZE_FLAGS}>")
  add_link_options(${STAGGER_SANITIZE_FLAGS})
  set(STAGGER_SANITIZE_SUMMARY "ASan + UBSan (${CMAKE_C_COMPILER_ID})")
endif()

# STAGGER_FUZZ: libFuzzer coverage on every C target, and one fuzzer binary
# per target of tests/fuzz/fuzz_targets.c (fuzz_NAME; tests/fuzz/run.sh runs
# them). Needs clang and its compiler-rt (Debian: libclang-rt-14-dev).
option(STAGGER_FUZZ "Build the libFuzzer targets (clang; see docs/RELIABILITY.md)" OFF)
if(STAGGER_FUZZ)
  add_compile_options("$<$<COMPILE_LANGUAGE:C>:-fsanitize=fuzzer-no-link>")
  set(STAGGER_SANITIZE_SUMMARY "${STAGGER_SANITIZE_SUMMARY}, libFuzzer targets")
endif()
