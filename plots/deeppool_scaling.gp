# deeppool_scaling.gp: strong scaling, data parallelism against burst
# parallelism and multiplexing (plots/deeppool_scaling.sh writes the table).
#   datafile  the CSV of deeppool_scaling.sh (gpus, dp, burst, ... columns)
#   outfile   the PNG to write
#   name      the title: model, global batch, background job
# Left: samples per second over all jobs; right: the share of GPU time
# with no kernel running (the steady steps).
set terminal pngcairo noenhanced size 1400,560 font ",11"
set output outfile
set datafile separator ","
set key autotitle columnhead
set multiplot layout 1,2 title name
set logscale x 2
set xlabel "GPUs (global batch fixed)"
set grid
set key top left
set ylabel "samples/s (cluster: foreground + background)"
plot datafile using 1:2 with linespoints lw 2 title "data parallel", \
     datafile using 1:3 with linespoints lw 2 title "burst", \
     datafile using 1:6 with linespoints lw 2 title "burst + multiplex (cluster)", \
     datafile using 1:4 with linespoints dt 2 title "  its burst foreground", \
     datafile using 1:9 with linespoints lw 2 title "data parallel + multiplex (cluster)"
set ylabel "GPU time idle"
set yrange [0:1]
set key top left
plot datafile using 1:10 with linespoints lw 2 title "data parallel", \
     datafile using 1:11 with linespoints lw 2 title "burst", \
     datafile using 1:12 with linespoints lw 2 title "burst + multiplex"
unset multiplot
