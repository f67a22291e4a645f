# Detects the optional parts (CUDA, NCCL, gnuplot) and records what was found
# in STAGGER_*_SUMMARY for the configure summary. Nothing above the backends
# uses #ifdef: the executor picks a real or a stub source file from these
# results (see exec/).

set(STAGGER_HAVE_CUDA OFF)
set(STAGGER_CUDA_SUMMARY "disabled (STAGGER_CUDA=OFF)")
if(STAGGER_CUDA)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "nvcc")
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    find_package(CUDAToolkit QUIET)
  endif()
  if(CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND)
    set(STAGGER_HAVE_CUDA ON)
    set(STAGGER_CUDA_SUMMARY "found: ${CMAKE_CUDA_COMPILER}")
  else()
    set(STAGGER_CUDA_SUMMARY "not found (the cuda backend is a stub)")
  endif()
endif()

set(STAGGER_HAVE_NCCL OFF)
set(STAGGER_NCCL_SUMMARY "disabled (STAGGER_NCCL=OFF)")
if(STAGGER_NCCL)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS /usr/local/cuda/include ENV NCCL_HOME PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY nccl HINTS /usr/local/cuda/lib64 ENV NCCL_HOME PATH_SUFFIXES lib lib64)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(STAGGER_HAVE_NCCL ON)
    add_library(stagger::nccl UNKNOWN IMPORTED)
    set_target_properties(stagger::nccl PROPERTIES
      IMPORTED_LOCATION "${NCCL_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
    set(STAGGER_NCCL_SUMMARY "found: ${NCCL_LIBRARY}")
  else()
    set(STAGGER_NCCL_SUMMARY "not found (the nccl backend is a stub)")
  endif()
endif()

# MPI (OpenMPI from Debian): `stagger plan` under mpirun spreads its search
# over the ranks through the module libstagger-mpi.so (sim/plan/plan_dist.h).
set(STAGGER_HAVE_MPI OFF)
set(STAGGER_MPI_SUMMARY "disabled (STAGGER_MPI=OFF)")
if(STAGGER_MPI)
  find_package(MPI COMPONENTS C QUIET)
  if(MPI_C_FOUND)
    set(STAGGER_HAVE_MPI ON)
    set(STAGGER_MPI_SUMMARY "found: MPI ${MPI_C_VERSION} (stagger plan under mpirun)")
  else()
    set(STAGGER_MPI_SUMMARY "not found (stagger plan runs in one process; mpirun refused)")
  endif()
endif()

find_program(GNUPLOT_EXECUTABLE gnuplot)
if(GNUPLOT_EXECUTABLE)
  set(STAGGER_GNUPLOT_SUMMARY "found: ${GNUPLOT_EXECUTABLE}")
else()
  set(STAGGER_GNUPLOT_SUMMARY "not found (stagger plot will say so; plot tests skip)")
endif()
