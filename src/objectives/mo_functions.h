// Multi-objective test problems of the `function` objective (docs/config.md#function), the
// standard ones of the multi-objective literature, every objective minimised [tune_core, private].
#pragma once

#include <string>
#include <vector>

#include "tune/status.h"

namespace tune {

// The problems:
//  zdt1, zdt2, zdt3  2 objectives over x0..x9 in [0, 1] (Zitzler, Deb and Thiele, "Comparison of
//                    Multiobjective Evolutionary Algorithms: Empirical Results", 2000): convex,
//                    concave and disconnected fronts at x1..x9 = 0.
//  dtlz2             3 objectives over x0..x11 in [0, 1] (Deb, Thiele, Laumanns and Zitzler,
//                    "Scalable Test Problems for Evolutionary Multiobjective Optimization",
//                    2005): the positive octant of the unit sphere at x2..x11 = 0.5.
//  wfg4              2 objectives over z0..z9, z_i in [0, 2(i + 1)], 4 position and 6 distance
//                    parameters (Huband, Hingston, Barone and While, "A Review of Multiobjective
//                    Test Problems and a Scalable Test Problem Toolkit", 2006): multi-modal
//                    (s_multi), concave front.
std::vector<std::string> MultiObjectiveProblemNames();
// Objectives and variables of a problem; 0 for an unknown name.
int MultiObjectiveProblemObjectives(const std::string& name);
int MultiObjectiveProblemVariables(const std::string& name);
// The bounds of variable i ([0, 1] for a name other than wfg4's).
std::pair<double, double> MultiObjectiveProblemBounds(const std::string& name, int i);
// The objective values at x (MultiObjectiveProblemVariables(name) values). InvalidArgument for
// an unknown name or another number of values.
Result<std::vector<double>> EvaluateMultiObjectiveProblem(const std::string& name,
                                                          const std::vector<double>& x);

}  // namespace tune
