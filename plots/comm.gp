# comm.gp: aggregate send rate over all GPUs per link class, from a run's
# comm.csv (docs/FORMATS.md). Each row holds until the next, so rates are
# drawn as steps. Link classes that never carry traffic are left out.
#
# Set with -e by `stagger plot` (sim/output/plot.c):
#   datafile, outfile ('' = stdout), term, width, height, name: as in memory.gp
#   dev          what the devices are called: GPU, or CPU on the host

eval sprintf("set terminal %s size %d,%d", term, width, height)
if (outfile ne "") set output outfile
set datafile separator comma
set datafile columnheaders

stats datafile using 1 nooutput
end_ms = STATS_max / 1000.0

array link[4] = ["intra-node", "inter-node", "PCIe", "local"]
array colour[4] = ["#0072B2", "#D55E00", "#009E73", "#CC79A7"]
array used[4]
n_used = 0
do for [l = 1 : 4] {
  stats datafile using (column(l + 1)) nooutput
  used[l] = STATS_max > 0
  n_used = n_used + used[l]
}

set title sprintf("%s: send rate over all %ss by link class", name, dev) font ",13"
set xlabel "time (ms)"
set ylabel "send rate (GB/s)"
set grid ytics lc rgb "#dddddd"
set key outside right top Left reverse samplen 2
set xrange [0:end_ms > 0 ? end_ms : 1]
# A run without communication still gets its (flat) figure, without a
# warning about the empty range.
if (n_used > 0) { set yrange [0:*] } else { set yrange [0:1] }
set offsets 0, 0, graph 0.05, 0

cmd = ""
do for [l = 1 : 4] {
  if (used[l]) {
    cmd = cmd . sprintf("datafile using ($1 / 1000.0):%d with steps lw 2 lc rgb '%s' title '%s', ", \
                        l + 1, colour[l], link[l])
  }
}
# The total only adds information when more than one class is in use.
if (n_used != 1) {
  cmd = cmd . "datafile using ($1 / 1000.0):6 with steps lw 1 dt 2 lc rgb 'black' title 'total'"
} else {
  cmd = cmd[1 : strlen(cmd) - 2]
}
eval "plot " . cmd
