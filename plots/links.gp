# links.gp: the busiest links of a simulated run over time, from its
# link_rates.csv (docs/FORMATS.md): each link's send rate as a share of its
# capacity, as steps (each row holds until the next), so links of different
# speeds share one axis and a link at 100 % is the bottleneck while it stays
# there.
#
# Set with -e by `stagger plot` (sim/output/plot.c):
#   datafile, outfile ('' = stdout), term, width, height, name: as in memory.gp
#   caps: the capacity in GB/s of each link column, in order, space separated

eval sprintf("set terminal %s size %d,%d", term, width, height)
if (outfile ne "") set output outfile
set datafile separator comma
set datafile columnheaders

stats datafile using 1 nooutput
end_ms = STATS_max / 1000.0
n = words(caps)

set title sprintf("%s: busiest links, send rate over capacity", name) font ",13"
set xlabel "time (ms)"
set ylabel "load (% of the link's capacity)"
set grid ytics lc rgb "#dddddd"
set key outside right top Left reverse samplen 2
set xrange [0:end_ms > 0 ? end_ms : 1]
set yrange [0:105]

if (n == 0) {
  set label 1 "no link carried traffic" at graph 0.5, 0.5 center
  plot 1/0 notitle
} else {
  plot for [i = 1 : n] datafile using ($1 / 1000.0):(column(i + 1) / real(word(caps, i)) * 100) \
       with steps lw 2 title sprintf("%s (%g GB/s)", columnhead(i + 1), real(word(caps, i)))
}
