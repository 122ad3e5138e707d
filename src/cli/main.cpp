// ropecheck: precision oracle for RoPE kernels. Exit codes: 0 success, 1 a check failed,
// 2 bad usage or bad input (never a crash); 130/143 a `report` sweep interrupted by
// SIGINT/SIGTERM (the previous report is left intact). The app itself is built in app.cpp.
#include "cli.hpp"

int main(int argc, char** argv) { return ropecheck::cli::run(argc, argv); }
