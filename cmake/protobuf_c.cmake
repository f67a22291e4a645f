# protobuf-c (Debian: libprotobuf-c-dev, protobuf-c-compiler): the C runtime
# and protoc-c, which turns a .proto schema into C at build time. Required:
# the ONNX importer (sim/import/) reads its models through it, and Chakra
# execution traces (sim/interop/) are read and written through it.
#
# stagger_protobuf_c(TARGET PROTO...): generates NAME.pb-c.c / NAME.pb-c.h
# from each PROTO into the build tree, compiles them into TARGET and puts
# them on its include path, for TARGET and what links it (the generated
# header is included as "NAME.pb-c.h").
#
# Also looks for protoc (Debian: protobuf-compiler), which stagger only uses
# in tests, as an independent decoder of the files it writes:
# PROTOC_EXECUTABLE, empty when absent (those tests skip).

pkg_check_modules(PROTOBUF_C REQUIRED IMPORTED_TARGET libprotobuf-c>=1.3)
find_program(PROTOC_C_EXECUTABLE NAMES protoc-c protoc-gen-c)
if(NOT PROTOC_C_EXECUTABLE)
  message(FATAL_ERROR "protoc-c not found (Debian: protobuf-c-compiler)")
endif()
set(STAGGER_PROTOBUF_C_SUMMARY "${PROTOBUF_C_VERSION} (${PROTOC_C_EXECUTABLE})")

find_program(PROTOC_EXECUTABLE protoc)
if(PROTOC_EXECUTABLE)
  set(STAGGER_PROTOC_SUMMARY "found: ${PROTOC_EXECUTABLE} (tests decode stagger's files with it)")
else()
  set(PROTOC_EXECUTABLE "")
  set(STAGGER_PROTOC_SUMMARY "not found (the independent-decoder tests skip)")
endif()

function(stagger_protobuf_c target)
  set(out ${CMAKE_CURRENT_BINARY_DIR}/protobuf_c)
  file(MAKE_DIRECTORY ${out})
  foreach(proto ${ARGN})
    get_filename_component(abs ${proto} ABSOLUTE)
    get_filename_component(name ${abs} NAME_WE)
    get_filename_component(dir ${abs} DIRECTORY)
    add_custom_command(
      OUTPUT ${out}/${name}.pb-c.c ${out}/${name}.pb-c.h
      COMMAND ${PROTOC_C_EXECUTABLE} --c_out=${out} --proto_path=${dir} ${abs}
      DEPENDS ${abs}
      COMMENT "protoc-c ${name}.proto"
      VERBATIM)
    target_sources(${target} PRIVATE ${out}/${name}.pb-c.c)
    # Generated code: not ours to warn about.
    set_source_files_properties(${out}/${name}.pb-c.c PROPERTIES COMPILE_OPTIONS "-w")
  endforeach()
  target_include_directories(${target} PUBLIC ${out})
  target_link_libraries(${target} PUBLIC PkgConfig::PROTOBUF_C)
endfunction()
