# compare_comm.gp: total send rate over all GPUs of several runs side by
# side, one line per run, from each run's comm.csv (docs/FORMATS.md).
#
# Set with -e by `stagger plot` (sim/output/plot.c):
#   outfile ('' = stdout), term, width, height: as in memory.gp
#   dev          what the devices are called: GPU, or CPU on the host
#   title      the figure's title
#   n          number of runs
#   file1..    each run's comm.csv; name1.. its label

eval sprintf("set terminal %s size %d,%d", term, width, height)
if (outfile ne "") set output outfile
set datafile separator comma
set datafile columnheaders

file(i) = value(sprintf("file%d", i))
label(i) = value(sprintf("name%d", i))

end_us = 0
top = 0
do for [i = 1 : n] {
  stats file(i) using 1 nooutput
  end_us = STATS_max > end_us ? STATS_max : end_us
  stats file(i) using 6 nooutput
  top = STATS_max > top ? STATS_max : top
}

set title title font ",13"
set xlabel "time (ms)"
set ylabel sprintf("send rate over all %ss (GB/s)", dev)
set grid ytics lc rgb "#dddddd"
set key outside right top Left reverse samplen 2
set xrange [0:end_us > 0 ? end_us / 1000.0 : 1]
# Runs without communication: a flat figure, without a warning.
if (top > 0) { set yrange [0:*] } else { set yrange [0:1] }
set offsets 0, 0, graph 0.05, 0

plot for [i = 1 : n] file(i) using ($1 / 1000.0):6 with steps lw 2 title label(i)
