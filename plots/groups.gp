# groups.gp: each communicator's traffic over time, from a run's groups.csv
# (docs/FORMATS.md): the bus bytes (nccl-tests' busbw convention) its
# collectives and sends move per second, summed over all ranks. Each row
# holds until the next, so rates are drawn as steps. Communicators that
# never carry traffic are left out of the key.
#
# Set with -e by `stagger plot` (sim/output/plot.c):
#   datafile, outfile ('' = stdout), term, width, height, name: as in memory.gp
#   n_comms      the communicators: columns 2 .. n_comms + 1 (then total)

eval sprintf("set terminal %s size %d,%d", term, width, height)
if (outfile ne "") set output outfile
set datafile separator comma
set datafile columnheaders

stats datafile using 1 nooutput
end_ms = STATS_max / 1000.0

array colour[8] = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"]
n_used = 0
cmd = ""
do for [c = 1 : n_comms] {
  stats datafile using (column(c + 1)) nooutput
  if (STATS_max > 0) {
    n_used = n_used + 1
    cmd = cmd . sprintf("datafile using ($1 / 1000.0):%d with steps lw 2 lc rgb '%s' title columnhead(%d), ", \
                        c + 1, colour[(n_used - 1) % 8 + 1], c + 1)
  }
}

set title sprintf("traffic by communicator (bus bytes/s over all ranks)\n%s", name) font ",12" noenhanced
set xlabel "time (ms)"
set ylabel "rate (GB/s)"
set grid ytics lc rgb "#dddddd"
set key outside right top Left reverse samplen 2 noenhanced
set xrange [0:end_ms > 0 ? end_ms : 1]
if (n_used > 0) { set yrange [0:*] } else { set yrange [0:1] }
set offsets 0, 0, graph 0.05, 0

if (n_used == 0) {
  plot datafile using ($1 / 1000.0):(0) with steps lc rgb 'black' title 'no communication'
} else {
  eval "plot " . cmd[1 : strlen(cmd) - 2]
}
