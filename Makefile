# levelfeed — top-level build.
#
# One Makefile for the whole tree; each folder adds its parts in its own
# module.mk (libraries and programs), so the folders stay independent.
# Tests, fuzz targets and benchmarks are found by name:
#   tests/unit/NAME.c   -> $(B)/tests/unit/NAME   (one program per test)
#   tests/tools/NAME.c  -> $(B)/tests/tools/NAME  (helpers the e2e scripts run)
#   tests/fuzz/NAME.c   -> $(B)/fuzz/NAME-replay  (corpus replay, no libFuzzer)
#   tests/bench/NAME.c  -> $(B)/bench/NAME
# Every program links every project library (static, grouped) and the
# external libraries; the linker keeps what each one uses.

PREFIX  ?= /usr/local
DESTDIR ?=
CC      ?= cc
CFLAGS  ?= -O2 -g
SANITIZE ?=
CUDA    ?= auto
MPI     ?= auto
FUZZ_SECONDS ?= 60

# One build folder per configuration, so a sanitizer build never mixes
# objects with a plain one.
comma := ,
B := build/$(if $(SANITIZE),san-$(subst $(comma),-,$(SANITIZE)),default)$(if $(FUZZ_BUILD),-fuzz)

WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
        -Wvla -Wformat=2 -Wcast-qual -Wpointer-arith -Wundef
ifeq ($(CI),true)
WERROR ?= 1
endif
ifeq ($(WERROR),1)
WARN += -Werror
endif

INCLUDES := -Ishard_format -Ibalancer -Itransforms -Iclient -Icommon -Itests
override CFLAGS += -std=c11 -D_GNU_SOURCE -fPIC -MMD -MP $(WARN) $(INCLUDES)
LDLIBS_EXT := -lzstd -lturbojpeg -ljpeg -lzmq -luring -ljansson -lpthread -lm

ifneq ($(SANITIZE),)
override CFLAGS  += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
override LDFLAGS += -fsanitize=$(SANITIZE)
endif
ifneq ($(FUZZ_BUILD),)
override CFLAGS += -fsanitize=fuzzer-no-link -DLF_FUZZING=1
endif

# Optional parts: detected, reported in one line, switchable (CUDA=0, MPI=0).
# CUDA=1 builds lf-train's GPU model, which links NCCL: NVIDIA's toolkit
# comes without it (libnccl-dev), so auto wants both.
NVCC ?= $(wildcard /usr/local/cuda/bin/nvcc)
NCCL_LIB := $(firstword $(wildcard $(patsubst %/bin/nvcc,%/lib64,$(NVCC))/libnccl.so \
                                   /usr/lib/*-linux-gnu/libnccl.so))
ifeq ($(CUDA),auto)
CUDA := $(if $(and $(NVCC),$(NCCL_LIB)),1,0)
CUDA_WHY := $(if $(NVCC),$(if $(NCCL_LIB),, (nvcc without NCCL)), (no nvcc))
endif
ifeq ($(MPI),auto)
MPI := $(if $(shell command -v mpicc 2>/dev/null),1,0)
endif

LIBS :=
PROGRAMS :=

# Objects depend on a stamp holding the configuration, so changing CFLAGS,
# CUDA or MPI in the same build folder rebuilds instead of mixing objects.
# Written by a rule, only when something is built (not by make -n, config
# or clean), and only when the configuration differs (its time then says so).
CONFIG_STAMP := $(B)/.config
config_line := $(CC) $(CFLAGS) CUDA=$(CUDA) MPI=$(MPI)
$(CONFIG_STAMP): FORCE
	@mkdir -p $(@D)
	@[ "$$(cat $@ 2>/dev/null)" = '$(config_line)' ] || echo '$(config_line)' >$@
.PHONY: FORCE

# Objects also depend on the module.mk that lists them (the one being read
# when the rule is made): per-file flags set there must rebuild them.
module_mk = $(lastword $(filter %/module.mk,$(MAKEFILE_LIST)))

# $(call static_lib,NAME,SOURCES): $(B)/lib/libNAME.a from SOURCES.
define static_lib
$(patsubst %.c,$(B)/obj/%.o,$(2)): $(module_mk)
$(B)/lib/lib$(1).a: $(patsubst %.c,$(B)/obj/%.o,$(2))
	@mkdir -p $$(@D)
	$$(AR) rcs $$@ $$^
LIBS += $(B)/lib/lib$(1).a
endef

# $(call program,NAME,SOURCES): $(B)/bin/NAME linked with every project library.
# LIBS is expanded a second time, when make runs, so a program depends on the
# libraries of modules read after its own (a parallel build must not link a
# half-written archive).
.SECONDEXPANSION:
define program
$(patsubst %.c,$(B)/obj/%.o,$(2)): $(module_mk)
$(B)/bin/$(1): $(patsubst %.c,$(B)/obj/%.o,$(2)) $$$$(LIBS)
	@mkdir -p $$(@D)
	$$(CC) $$(LDFLAGS) -o $$@ $(patsubst %.c,$(B)/obj/%.o,$(2)) $$(LINK_LIBS)
PROGRAMS += $(B)/bin/$(1)
endef

MODULES := common shard_format balancer transforms server client tools/lf-shard tools/lf-plan tools/harness tools/lf-launch
-include $(wildcard $(addsuffix /module.mk,$(MODULES)))

LINK_LIBS = -Wl,--start-group $(LIBS) -Wl,--end-group $(LDLIBS_EXT)

UNIT_SRCS  := $(wildcard tests/unit/*.c)
UNIT_BINS  := $(patsubst tests/unit/%.c,$(B)/tests/unit/%,$(UNIT_SRCS))
TOOL_SRCS  := $(wildcard tests/tools/*.c)
TOOL_BINS  := $(patsubst tests/tools/%.c,$(B)/tests/tools/%,$(TOOL_SRCS))
FUZZ_SRCS  := $(filter-out tests/fuzz/replay.c,$(wildcard tests/fuzz/*.c))
FUZZ_REPLAY := $(patsubst tests/fuzz/%.c,$(B)/fuzz/%-replay,$(FUZZ_SRCS))
FUZZ_BINS  := $(patsubst tests/fuzz/%.c,$(B)/fuzz/%-libfuzzer,$(FUZZ_SRCS))
BENCH_SRCS := $(wildcard tests/bench/*.c)
BENCH_BINS := $(patsubst tests/bench/%.c,$(B)/bench/%,$(BENCH_SRCS))

.PHONY: all deps build test bench fuzz fuzzers install clean config demo
.DEFAULT_GOAL := all

all: deps
	@$(MAKE) --no-print-directory build

deps:
	@scripts/deps.sh

config:
	@echo "levelfeed: build $(B), CC=$(CC), SANITIZE=$(or $(SANITIZE),none), CUDA=$(CUDA)$(if $(filter 1,$(CUDA)), ($(NVCC)),$(CUDA_WHY)), MPI=$(MPI)"

build: config $(LIBS) $(PROGRAMS) $(UNIT_BINS) $(TOOL_BINS) $(FUZZ_REPLAY) $(BENCH_BINS)

$(B)/obj/%.o: %.c $(CONFIG_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c -o $@ $<

$(B)/tests/%: $(B)/obj/tests/%.o $(LIBS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $< $(LINK_LIBS)

$(B)/bench/%: $(B)/obj/tests/bench/%.o $(LIBS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $< $(LINK_LIBS)

$(B)/fuzz/%-replay: $(B)/obj/tests/fuzz/%.o $(B)/obj/tests/fuzz/replay.o $(LIBS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $< $(B)/obj/tests/fuzz/replay.o $(LINK_LIBS)

$(B)/fuzz/%-libfuzzer: $(B)/obj/tests/fuzz/%.o $(LIBS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -fsanitize=fuzzer -o $@ $< $(LINK_LIBS)

test: deps
	@$(MAKE) --no-print-directory build
	@tests/run.sh $(B)

bench: deps
	@$(MAKE) --no-print-directory build
	@tests/bench/run.sh $(B)

# libFuzzer needs clang and coverage instrumentation in every object, so the
# fuzz build is its own configuration.
FUZZ_B ?= build/fuzz
fuzz: deps
	@$(MAKE) --no-print-directory CC=clang SANITIZE=address,undefined FUZZ_BUILD=1 B=$(FUZZ_B) fuzzers
	@tests/fuzz/run.sh $(FUZZ_B) $(FUZZ_SECONDS)

fuzzers: config $(LIBS) $(FUZZ_BINS)

demo: deps
	@$(MAKE) --no-print-directory build
	@scripts/demo.sh $(B)

install: all
	scripts/install.sh "$(DESTDIR)" "$(PREFIX)" "$(B)"

clean:
	rm -rf build

-include $(shell find $(B) -name "*.d" 2>/dev/null)
