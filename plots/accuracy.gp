# accuracy.gp: the accuracy study (plots/accuracy_study.sh): training loss
# and held-out accuracy of each configuration against steps and against the
# simulated wall time of those steps.
#
# Set with -e by plots/accuracy_study.sh:
#   dir      folder of NAME.csv (step,sim_time_ms,train_loss,heldout_loss,heldout_accuracy)
#   names    the configurations, space-separated
#   outfile  the PNG to write
#   steps    training steps
set terminal pngcairo noenhanced size 1400,1000 font ",11"
set output outfile
set datafile separator comma
set datafile columnheaders
set datafile missing ""
set grid lc rgb "#dddddd"
set key bottom right font ",10"
colors = "#000000 #d62728 #ff7f0e #9467bd #2ca02c #8c564b #1f77b4 #17becf"
file(i) = sprintf("%s/%s.csv", dir, word(names, i))
n = words(names)
# dp thick (the reference); burst and multiplex dashed: they train exactly as dp
lw(i) = word(names, i) eq "dp" ? 3 : 1.5
dt(i) = word(names, i) eq "burst" ? 2 : (word(names, i) eq "multiplex" ? 3 : 1)
set multiplot layout 2,2 title sprintf("UCI digits, MLP 64-64-32-10, 4 ranks x 16 samples, Adam, %d steps: measured loss and held-out accuracy (held-out: 359 rows); time simulated on DGX-H100", steps) font ",12"

set title "training loss (mean over the global batch) against steps"
set xlabel "step"
set ylabel "loss"
set logscale y
set key top right
plot for [i=1:n] file(i) using 1:3 with lines lw (word(names, i) eq "dp" ? 2 : 1) dt dt(i) lc rgb word(colors, i) title word(names, i)
unset logscale y

set title "held-out accuracy against steps"
set ylabel "top-1 accuracy"
set yrange [0.5:1]
set key bottom right
plot for [i=1:n] file(i) using 1:5 with linespoints lw lw(i) dt dt(i) pt 7 ps 0.5 lc rgb word(colors, i) title word(names, i)

set title "held-out accuracy against simulated wall time (time to accuracy)"
set xlabel "simulated time (ms): end of the step in stagger sim on dgx-h100, 4 GPUs"
plot for [i=1:n] file(i) using 2:5 with linespoints lw lw(i) dt dt(i) pt 7 ps 0.5 lc rgb word(colors, i) title word(names, i)

set title "held-out loss against simulated wall time"
set ylabel "cross-entropy"
set yrange [*:*]
set logscale y
set key top right
plot for [i=1:n] file(i) using 2:4 with linespoints lw lw(i) dt dt(i) pt 7 ps 0.5 lc rgb word(colors, i) title word(names, i)
unset multiplot
