# shard_format: the on-disk dataset format (FORMAT.md), writer and reader.
shard_format_SRCS := shard_format/format.c shard_format/hash.c shard_format/hash_avx2.c \
                     shard_format/writer.c shard_format/reader.c shard_format/compact.c
$(eval $(call static_lib,lf_shard,$(shard_format_SRCS)))
