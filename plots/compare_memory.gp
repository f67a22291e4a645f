# compare_memory.gp: memory over time of several runs side by side
# (`stagger sim --strategy a,b --out DIR` writes one subdirectory per run),
# one line per run, from each run's memory.csv (docs/FORMATS.md), in three
# panels: the total of each run's first recorded GPU; the activations of that
# GPU; the activations summed over all GPUs (where cyclic DP's staggered
# workers differ from DP's synchronous ones).
#
# Set with -e by `stagger plot` (sim/output/plot.c):
#   outfile ('' = stdout), term, width, height: as in memory.gp
#   dev          what the devices are called: GPU, or CPU on the host
#   title      the figure's title
#   n          number of runs
#   file1..    each run's memory.csv; name1.. its label; first1.., last1.. the
#              indices of the first and last data rows of the GPU drawn
#   devs1.., wts1..  space-separated recorded devices that stand for several
#              devices (folded), and how many each stands for; every other
#              recorded device stands for itself

eval sprintf("set terminal %s size %d,%d", term, width, height)
if (outfile ne "") set output outfile
set datafile separator comma
set datafile columnheaders

file(i) = value(sprintf("file%d", i))
label(i) = value(sprintf("name%d", i))
first(i) = value(sprintf("first%d", i))
last(i) = value(sprintf("last%d", i))
devs(i) = value(sprintf("devs%d", i))
wts(i) = value(sprintf("wts%d", i))

# Devices a recorded device stands for (report.json's represented_by).
weight(i, d) = words(devs(i)) == 0 ? 1 : \
  1 + sum [k = 1 : words(devs(i))] (word(devs(i), k) + 0 == d ? word(wts(i), k) - 1 : 0)
# The sum over GPUs as a running sum of each row's change: rows of one device
# are contiguous and in time order, so a row's change is its value minus the
# row before when that row is the same device's, weighted; `smooth
# cumulative` sorts the changes by time and adds them up.
change(i, dev, v) = (ch = (dev == prevdev ? v - prev : v), prev = v, prevdev = dev, \
                     ch * weight(i, dev))

peak = 0
end_us = 0
do for [i = 1 : n] {
  stats file(i) every ::first(i)::last(i) using 1:9 nooutput
  peak = STATS_max_y > peak ? STATS_max_y : peak
  end_us = STATS_max_x > end_us ? STATS_max_x : end_us
}
unitof(x) = x >= 2**30 ? 2**30 : x >= 2**20 ? 2**20 : x >= 2**10 ? 2**10 : 1
unitname(x) = x >= 2**30 ? "GiB" : x >= 2**20 ? "MiB" : x >= 2**10 ? "KiB" : "bytes"
unit = unitof(peak)

# The sum over GPUs, per run into a table (it reaches N times one GPU's
# peak: its own unit).
total = 0
do for [i = 1 : n] {
  prev = 0; prevdev = -1
  eval sprintf("set table $sum%d", i)
  plot file(i) using 1:(change(i, $2, $6)) smooth cumulative
  unset table
}
set multiplot layout 3, 1 title title font ",13"
set xlabel "time (ms)"
set grid ytics lc rgb "#dddddd"
set key outside right top Left reverse samplen 2
set xrange [0:end_us > 0 ? end_us / 1000.0 : 1]
set yrange [0:*]
set offsets 0, 0, graph 0.05, 0

set title sprintf("total memory of each run's first %s", dev)
set ylabel sprintf("memory (%s)", unitname(peak))
plot for [i = 1 : n] file(i) every ::first(i)::last(i) using ($1 / 1000.0):($9 / unit) \
     with steps lw 2 title label(i)

set title sprintf("activations of each run's first %s", dev)
plot for [i = 1 : n] file(i) every ::first(i)::last(i) using ($1 / 1000.0):($6 / unit) \
     with steps lw 2 title label(i)

set datafile separator whitespace
set datafile nocolumnheaders
do for [i = 1 : n] {
  eval sprintf("stats $sum%d using 2 nooutput", i)
  total = STATS_max > total ? STATS_max : total
}
set title sprintf("activations summed over all %ss", dev)
set ylabel sprintf("activations (%s)", unitname(total))
plot for [i = 1 : n] sprintf("$sum%d", i) using ($1 / 1000.0):($2 / unitof(total)) \
     with steps lw 2 title label(i)
unset multiplot
