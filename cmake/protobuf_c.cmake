# protobuf-c (Debian: libprotobuf-c-dev, protobuf-c-compiler): the C runtime
# and protoc-c, which turns a .proto schema into C at build time. Required:
# the ONNX importer (sim/import/) reads its models through it.
#
# stagger_protobuf_c(TARGET PROTO): generates NAME.pb-c.c / NAME.pb-c.h from
# PROTO into the build tree, compiles them into TARGET and puts them on its
# include path (the generated header is included as "NAME.pb-c.h").

pkg_check_modules(PROTOBUF_C REQUIRED IMPORTED_TARGET libprotobuf-c>=1.3)
find_program(PROTOC_C_EXECUTABLE NAMES protoc-c protoc-gen-c)
if(NOT PROTOC_C_EXECUTABLE)
  message(FATAL_ERROR "protoc-c not found (Debian: protobuf-c-compiler)")
endif()
set(STAGGER_PROTOBUF_C_SUMMARY "${PROTOBUF_C_VERSION} (${PROTOC_C_EXECUTABLE})")

function(stagger_protobuf_c target proto)
  get_filename_component(name ${proto} NAME_WE)
  get_filename_component(dir ${proto} DIRECTORY)
  set(out ${CMAKE_CURRENT_BINARY_DIR}/protobuf_c)
  file(MAKE_DIRECTORY ${out})
  add_custom_command(
    OUTPUT ${out}/${name}.pb-c.c ${out}/${name}.pb-c.h
    COMMAND ${PROTOC_C_EXECUTABLE} --c_out=${out} --proto_path=${dir} ${proto}
    DEPENDS ${proto}
    COMMENT "protoc-c ${name}.proto"
    VERBATIM)
  target_sources(${target} PRIVATE ${out}/${name}.pb-c.c)
  target_include_directories(${target} PRIVATE ${out})
  target_link_libraries(${target} PUBLIC PkgConfig::PROTOBUF_C)
  # Generated code: not ours to warn about.
  set_source_files_properties(${out}/${name}.pb-c.c PROPERTIES COMPILE_OPTIONS "-w")
endfunction()
