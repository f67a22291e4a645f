# compare_memory.gp: total memory over time of several runs side by side
# (`stagger sim --strategy a,b --out DIR` writes one subdirectory per run),
# one line per run: the total of each run's first recorded GPU, from its
# memory.csv (docs/FORMATS.md).
#
# Set with -e by `stagger plot` (sim/output/plot.c):
#   outfile ('' = stdout), term, width, height: as in memory.gp
#   title      the figure's title
#   n          number of runs
#   file1..    each run's memory.csv; name1.. its label; first1.., last1.. the
#              indices of the first and last data rows of the GPU drawn

eval sprintf("set terminal %s size %d,%d", term, width, height)
if (outfile ne "") set output outfile
set datafile separator comma
set datafile columnheaders

file(i) = value(sprintf("file%d", i))
label(i) = value(sprintf("name%d", i))
first(i) = value(sprintf("first%d", i))
last(i) = value(sprintf("last%d", i))

peak = 0
end_us = 0
do for [i = 1 : n] {
  stats file(i) every ::first(i)::last(i) using 1:9 nooutput
  peak = STATS_max_y > peak ? STATS_max_y : peak
  end_us = STATS_max_x > end_us ? STATS_max_x : end_us
}
unit = peak >= 2**30 ? 2**30 : peak >= 2**20 ? 2**20 : peak >= 2**10 ? 2**10 : 1
unitname = peak >= 2**30 ? "GiB" : peak >= 2**20 ? "MiB" : peak >= 2**10 ? "KiB" : "bytes"

set title title font ",13"
set xlabel "time (ms)"
set ylabel sprintf("memory of one GPU (%s)", unitname)
set grid ytics lc rgb "#dddddd"
set key outside right top Left reverse samplen 2
set xrange [0:end_us > 0 ? end_us / 1000.0 : 1]
set yrange [0:*]
set offsets 0, 0, graph 0.05, 0

plot for [i = 1 : n] file(i) every ::first(i)::last(i) using ($1 / 1000.0):($9 / unit) \
     with steps lw 2 title label(i)
