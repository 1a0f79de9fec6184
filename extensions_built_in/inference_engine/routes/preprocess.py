"""Control maps: POST /preprocess makes the map a control image gives (extensions_built_in/inference_engine/
preprocess.py), so a person sees it before generating; GET /preprocessors lists the table."""
import asyncio
import base64
from typing import Literal

from fastapi import Depends, Request as HttpRequest
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from extensions_built_in.inference_engine.engine import EngineBusy
from extensions_built_in.inference_engine.http_guard import INLINE_IMAGES_BODY_BYTES
from extensions_built_in.inference_engine.preprocess import PreprocessFailed, image_bytes, make_png
from extensions_built_in.inference_engine.routes.common import ApiError, engine_router, errors, require_token
from toolkit.control_maps import PREPROCESSORS

router = engine_router(dependencies=[Depends(require_token)])


class PreprocessBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    image: str = Field(description="a data:image/...;base64, URL, bare base64, or an asset id from POST /assets")
    preprocessor: str = Field(description="a name of GET /preprocessors (canny, depth_anything, ...)")
    processor_res: int | float | None = Field(default=None, description="the short side the map is made at "
                                              "(64..2048); default the preprocessor's")
    threshold_a: float | None = None
    threshold_b: float | None = None
    format: Literal["png", "json"] = Field(default="png", description="png: the map's bytes (image/png); "
                                           "json: {image: data URL, width, height, preprocessor}")


@router.post("/preprocess", responses={**errors(413, 503), 200: {"content": {"image/png": {}}}},
             max_body_size=INLINE_IMAGES_BODY_BYTES)
async def preprocess(body: PreprocessBody, request: HttpRequest):
    engine = request.app.state.engine
    try:        # off the event loop: decoding, opencv, or the wait for the worker
        data = await asyncio.to_thread(image_bytes, engine, body.image, "image")
        png = await asyncio.to_thread(make_png, engine, body.preprocessor, data, resolution=body.processor_res,
                                      threshold_a=body.threshold_a, threshold_b=body.threshold_b)
    except EngineBusy as e:
        raise ApiError(503, "body", str(e))
    except PreprocessFailed as e:
        raise ApiError(500, "preprocessor", f"preprocessor: {e}")
    if body.format == "png":
        return Response(png, media_type="image/png")
    from PIL import Image
    import io
    with Image.open(io.BytesIO(png)) as im:
        width, height = im.size
    return {"image": "data:image/png;base64," + base64.b64encode(png).decode("ascii"), "width": width,
            "height": height, "preprocessor": body.preprocessor}


@router.get("/preprocessors", responses=errors())
def preprocessors(request: HttpRequest):
    """The preprocessor table (toolkit/control_maps.PREPROCESSORS), each with `available`: whether its
    model is here (toolkit/annotators.py); and the annotator folders found."""
    from toolkit import annotators
    found = annotators.listing(request.app.state.engine.model_folders)
    keys = {e["key"] for e in found}
    return {"preprocessors": [{**p.describe(), "available": p.model is None or p.model in keys}
                              for p in PREPROCESSORS.values()],
            "annotators": found}
