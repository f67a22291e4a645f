# memory.gp: memory of each recorded GPU over time, stacked by category, one
# panel per GPU (at most 8), from a run's memory.csv (docs/FORMATS.md).
#
# Set with -e by `stagger plot` (sim/output/plot.c):
#   datafile   memory.csv
#   outfile    the image to write; '' writes to stdout (dumb terminal)
#   term       terminal name and options, without size ("pngcairo noenhanced")
#   width, height   terminal size (pixels, or characters for dumb)
#   name       the run's name, for the title
#   kind       "predicted" or "measured"
#   dev        what the devices are called: GPU, or CPU on the host
#   ndev       panels to draw (1..8)
#   columns    panels side by side (2 on a page, 1 on a terminal)
#   dev1..dev8 the device id of each panel; label1..label8 its title;
#              first1..first8, last1..last8 the indices of its first and last
#              data rows (rows of a device are contiguous): reading only those
#              keeps big tables fast
#   note       '' or a line saying what was left out ("first 8 of 16 GPUs") and
#              whether a GPU runs out of memory
#   capacity   the GPU's memory in bytes, drawn as a line on every panel; 0: none
#              (a measured run, whose capacity is the device it ran on)
#   oomdev     the device that runs out of memory, -1 when none; oombytes its
#              peak as the device shows it (nvidia-smi: tensors and what the
#              framework holds beyond them), oomms when (ms), oomlabel the
#              text marked there

eval sprintf("set terminal %s size %d,%d", term, width, height)
if (outfile ne "") set output outfile
set datafile separator comma
set datafile columnheaders

# Bytes shown in the largest binary unit the peak reaches: the tensors', the
# capacity or the out-of-memory peak, whichever is highest, so that both show.
stats datafile using 1:9 nooutput
end_ms = STATS_max_x / 1000.0
peak = STATS_max_y
if (capacity > peak) peak = capacity
if (oomdev >= 0 && oombytes > peak) peak = oombytes
unit = peak >= 2**30 ? 2**30 : peak >= 2**20 ? 2**20 : peak >= 2**10 ? 2**10 : 1
unitname = peak >= 2**30 ? "GiB" : peak >= 2**20 ? "MiB" : peak >= 2**10 ? "KiB" : "bytes"

cols = columns
rows = (ndev + cols - 1) / cols

heading = sprintf("%s: memory per %s by category (%s)", name, dev, kind)
if (note ne "") heading = heading . "\n" . note
set multiplot layout rows, cols title heading font ",13"

set xlabel "time (ms)"
set ylabel sprintf("memory (%s)", unitname)
set grid ytics lc rgb "#dddddd"
set key outside right top Left reverse samplen 2
# A border in the fill colour hides the seams between the steps of a layer.
set style fill solid 1.0 border
# One scale for every panel, so GPUs compare at a glance.
set yrange [0:(peak > 0 ? peak * 1.05 / unit : 1)]
set xrange [0:end_ms > 0 ? end_ms : 1]

# Category colours, top of the stack first: workspace, comm, activations,
# optimizer, grads, params (the key lists them in stacking order).
array colour[6] = ["#999999", "#56B4E9", "#CC79A7", "#009E73", "#E69F00", "#0072B2"]
array category[6] = ["workspace", "comm", "activations", "optimizer", "grads", "params"]

# The stack below category k (1 = workspace .. 6 = params) ends at column
# 9 - k: total, then total minus workspace, and so on. Each layer is drawn
# as a filled step from 0 over the layers under it.
below(k) = sum [c = 3 : 9 - k] column(c)
# Text terminals cannot fill: outlines of the layers, each in its own character.
layer = GPVAL_TERM eq "dumb" ? "steps" : "fillsteps"

# The capacity: a dashed line over the stack, in the key with its size.
capline = capacity > 0 \
  ? sprintf(", %.9g with lines dt 2 lw 2 lc rgb '#D55E00' title 'capacity %.3g %s'", \
            capacity * 1.0 / unit, capacity * 1.0 / unit, unitname) \
  : ""

do for [p = 1 : ndev] {
  first = value(sprintf("first%d", p))
  last = value(sprintf("last%d", p))
  set title value(sprintf("label%d", p))
  # Where the device that runs out of memory goes over: its peak as the
  # device shows it, at the moment of the peak.
  unset label 1
  if (oomdev == value(sprintf("dev%d", p))) {
    set label 1 oomlabel at first oomms, first oombytes * 1.0 / unit front point pt 7 ps 2 \
        lc rgb "#D55E00" tc rgb "#D55E00" offset 1, -1
  }
  plot for [k = 1 : 6] datafile every ::first::last using ($1 / 1000.0):(below(k) / unit) \
       with @layer lc rgb colour[k] title category[k] @capline
}
unset multiplot
