export DGXNGPU=8
export MBS=1
export TP_COMM_OVERLAP=True
export OVERLAP_GRAD_REDUCE=True
: "${DGXNNODES:=1}"
