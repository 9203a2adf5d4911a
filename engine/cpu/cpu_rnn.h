/* cpu/cpu_rnn.h: the CPU fused recurrent cell kernels (cpu_rnn.c), registered in cpu_backend.c
 * for the LSTM_CELL, LSTM_CELL_BACKWARD, GRU_CELL and GRU_CELL_BACKWARD slots.
 * defines: cpu_lstm_cell, cpu_lstm_cell_backward, cpu_gru_cell, cpu_gru_cell_backward. */
#ifndef DDPL_CPU_RNN_H
#define DDPL_CPU_RNN_H

#include "cpu_kernels.h"

DDPL_CPU_KERNEL(cpu_lstm_cell);
DDPL_CPU_KERNEL(cpu_lstm_cell_backward);
DDPL_CPU_KERNEL(cpu_gru_cell);
DDPL_CPU_KERNEL(cpu_gru_cell_backward);

#endif
