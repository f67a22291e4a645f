# samo_dp_scaling.gp: VGG-19 and WideResNet-101 in pure data parallelism on
# Summit, global batch 1024: step time against GPUs, dense and 90% sparse
# (the all-reduce moves the compressed gradient).
#
# Set with -e by plots/samo_figures.sh:
#   dir      the series directory: dp-MODEL-VARIANT.csv, columns gpus,step_s
#   outfile  the PNG to write
set terminal pngcairo noenhanced size 1200,500 font ",10"
set output outfile
set datafile separator comma
set datafile columnheaders
series(m, v) = sprintf("%s/dp-%s-%s.csv", dir, m, v)
set multiplot layout 1,2 title "Pure data parallelism on Summit, mixed precision SGD: dense vs 90% sparse (simulated)" font ",12"
set logscale xy 2
set grid lc rgb "#dddddd"
set xlabel "GPUs"
set ylabel "step time (s)"
set key top right
do for [m in "vgg19 wide_resnet101_2"] {
  set title m
  plot series(m, "dense") using 1:2 with linespoints lw 2 pt 7 lc rgb "#1f77b4" title "dense", \
       series(m, "sparse") using 1:2 with linespoints lw 2 pt 5 lc rgb "#d62728" title "sparse"
}
unset multiplot
