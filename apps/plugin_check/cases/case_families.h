// The families of fresco-plugin-check's reference cases, one file each (cases/*_cases.cpp): each fills `c`
// for the ops it knows, drawing its inputs from rng, and returns false for any other op (drawing nothing).
#pragma once

#include <random>
#include <string>

#include "op_cases.h"

namespace fresco::check {

// Relu, dropout, the residual join's masking pass, add / add_relu, GELU, SiLU, sigmoid, tanh.
bool pointwise_case(const std::string& op, std::mt19937& rng, OpCase* c);
// Fc and its backward, softmax cross-entropy and the fused fc + softmax cross-entropy head.
bool dense_case(const std::string& op, std::mt19937& rng, OpCase* c);
// Conv2d and its backward, max / average / global average pools, flatten in C,H,W order, concat.
bool conv_case(const std::string& op, std::mt19937& rng, OpCase* c);
// Batchnorm (training, with the residual add), its folded inference form, channel_affine, the backward.
bool batchnorm_case(const std::string& op, std::mt19937& rng, OpCase* c);
// The step's other ops: input normalisation, casts, clear / copy, metrics, the lr schedule, unscale, the loss
// scale update, SGD, Adam and the EMA.
bool step_case(const std::string& op, std::mt19937& rng, OpCase* c);

}  // namespace fresco::check
