package org.regionfailover.spark;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.SQLContext;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.execution.datasources.FileStatusCache;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.InMemoryFileIndex;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.sources.BaseRelation;
import org.apache.spark.sql.sources.SchemaRelationProvider;
import org.apache.spark.sql.types.StructType;
import scala.Option;
import scala.collection.immutable.Map;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A read of Parquet files whose sizes the caller knows: Spark's own file scan ({@code spark.read.parquet(files)}:
 * the same {@code HadoopFsRelation}, {@code ParquetFileFormat} and options) over exactly the files given in the
 * option {@code paths} (one per line) with the lengths in {@code sizes} (comma-separated, in the same order),
 * without listing them: Spark's file index finds each file's status in a cache filled from those lengths, so
 * resolving the read sends no request to the file system (through {@code s3a://}, {@code spark.read.parquet} sends
 * two HEADs and a LIST per file: its existence check and its listing). The schema is the caller's; there are no partition
 * columns (the files' parent directories are their base paths, as with {@code spark.read.parquet(files)}).
 */
public final class ListedParquet implements SchemaRelationProvider {

  @Override
  public BaseRelation createRelation(SQLContext sqlContext, Map<String, String> parameters, StructType schema) {
    SparkSession spark = sqlContext.sparkSession();
    String[] paths = required(parameters, "paths").split("\n");
    String[] sizes = required(parameters, "sizes").split(",");
    if (paths.length != sizes.length) {
      throw new IllegalArgumentException(
          "ListedParquet: " + paths.length + " paths but " + sizes.length + " sizes; give one size per path");
    }
    Map<String, String> options = parameters.removed("paths").removed("sizes");
    Configuration conf = spark.sessionState().newHadoopConfWithOptions(options);
    HashMap<Path, FileStatus[]> leaves = new HashMap<>();
    List<Path> roots = new ArrayList<>();
    try {
      for (int i = 0; i < paths.length; i++) {
        Path given = new Path(paths[i]);
        FileSystem fs = given.getFileSystem(conf);
        Path path = fs.makeQualified(given);
        long size = Long.parseLong(sizes[i].trim());
        leaves.put(path, new FileStatus[] {new FileStatus(size, false, 1, fs.getDefaultBlockSize(path), 0L, path)});
        roots.add(path);
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    InMemoryFileIndex index = new InMemoryFileIndex(spark, CollectionConverters.asScala(roots).toSeq(), options,
        Option.apply(schema), new Known(leaves), Option.empty(), Option.empty());
    return new HadoopFsRelation(index, new StructType(), schema, Option.empty(), new ParquetFileFormat(), options,
        spark);
  }

  private static String required(Map<String, String> options, String name) {
    Option<String> value = options.get(name);
    if (value.isEmpty() || value.get().isEmpty()) {
      throw new IllegalArgumentException("ListedParquet needs the option '" + name + "'");
    }
    return value.get();
  }

  /** The file statuses given, and nothing else: a path not given is listed by Spark as usual. */
  private static final class Known extends FileStatusCache {
    private final HashMap<Path, FileStatus[]> leaves;

    Known(HashMap<Path, FileStatus[]> leaves) {
      this.leaves = leaves;
    }

    @Override
    public Option<FileStatus[]> getLeafFiles(Path path) {
      return Option.apply(leaves.get(path));
    }

    @Override
    public void putLeafFiles(Path path, FileStatus[] files) {}

    @Override
    public void invalidateAll() {}
  }
}
